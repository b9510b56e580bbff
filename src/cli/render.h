// What a subcommand writes: escaped text (text.h), times and ages (time_text.h), JSON
// (json_writer.h), tables and raw lines (table.h), the fields of an entry (fields.h) and
// the totals (summary.h). Kept as one include for the subcommand files.
#pragma once

#include "cli/fields.h"
#include "cli/json_writer.h"
#include "cli/summary.h"
#include "cli/table.h"
#include "cli/text.h"
#include "cli/time_text.h"
