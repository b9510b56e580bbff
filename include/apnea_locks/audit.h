// The audit trail: every removal by reclaim and every takeover by run, as one line for the
// system log (System::log_audit: /dev/log, facility authpriv, else journald's own socket;
// failing both, standard error with a warning).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "apnea_locks/system.h"

namespace apnea_locks {

/// One removal (reclaim) or takeover (run reclaiming a dead owner's lock, as Apnea does).
struct AuditEvent {
  std::string action;     ///< "reclaim" or "takeover"
  std::string role;       ///< what was removed: "lock", "candidate", "tombstone", "reclaim-guard"
  std::string path;       ///< the entry that was removed
  std::string tombstone;  ///< the tombstone it was renamed to, when it was
  bool kept = false;      ///< the tombstone was kept (--keep-tombstone, or it changed)
  /// The owner record's exact bytes, when they were read (a guard has none).
  std::optional<std::string> owner_bytes;
  std::string proof;      ///< why it could be removed (the policy's reason, Apnea's rule)
  std::string trusts;     ///< what --force trusted for it, "" when nothing
  std::string label;      ///< what the lock is for: the repository, or "global setup at HOME"
  std::uint32_t acting_uid = 0;   ///< who acted: the uid that ran apnea-locks
  std::string acting_user;        ///< that uid's account name, when it has one
  /// The audit login uid (System::login_uid: who logged in, kept across sudo and su, which
  /// the environment is not) and its account name; none when unset.
  std::optional<std::uint32_t> login_uid;
  std::string login_user;
  std::uint32_t for_uid = 0;      ///< whose entry it was (the entry's owner uid)
  std::string for_user;           ///< that account's name when known (reclaim --user NAME)
};

/// Bytes as a C-like literal body: printable ASCII as is, `\\`, `\"`, `\n`, `\t`, `\r`,
/// and `\xNN` for everything else, so any content is one line of ASCII.
std::string escape_bytes(std::string_view bytes);

/// Records the event: fills the acting uid (`acting_uid`, else this process's), the account
/// names and the login uid from `system` (never from the environment), and sends the line
/// to the system log (System::log_audit). When no log takes it, writes
/// "apnea-locks: warning: no system log took the audit record (/dev/log,
/// /run/systemd/journal/socket); it follows:" and the line to standard error instead.
/// Where the record went: `none` only when standard error failed too.
AuditSink audit(System& system, AuditEvent event, std::optional<std::uint32_t> acting_uid = std::nullopt);

}  // namespace apnea_locks
