// Internals of audit.h: the line an audit event becomes.
// Not part of the library's interface (not installed); for src/ and the tests.
#pragma once

#include <cstddef>
#include <string>

#include "apnea_locks/audit.h"

namespace apnea_locks::detail {

/// The owner bytes a record carries at most (escaped, before `...`): a log line stays short.
inline constexpr std::size_t audit_owner_limit = 1024;

/// The event as one line of printable ASCII: `key=value` pairs, text values quoted and
/// escaped by escape_bytes, e.g. `reclaim removed lock path="..." owner="{\"pid\":42,...}"
/// proof="pid-dead (certain)" uid=0 for_uid=1000 for_user="ann"`.
std::string audit_line(const AuditEvent& event);

}  // namespace apnea_locks::detail
