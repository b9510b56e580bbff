// What a subcommand reads: its command line (options.h) and the lock area with its labels
// and timing (area.h). Kept as one include for the subcommand files.
#pragma once

#include "cli/area.h"
#include "cli/options.h"
#include "cli/terminal.h"
