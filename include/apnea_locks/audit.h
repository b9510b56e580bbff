// The audit trail: every removal by reclaim and every takeover by run, as one line for the
// system log (System::log_audit: syslog(3), facility authpriv, so journald collects it).
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
  std::uint32_t acting_uid = 0;   ///< who acted: the uid that ran apnea-locks
  std::string sudo_user;          ///< $SUDO_USER when that uid is root's and it is set
  std::uint32_t for_uid = 0;      ///< whose entry it was (the entry's owner uid)
  std::string for_user;           ///< that account's name when known (reclaim --user NAME)
};

/// Bytes as a C-like literal body: printable ASCII as is, `\\`, `\"`, `\n`, `\t`, `\r`,
/// and `\xNN` for everything else, so any content is one line of ASCII.
std::string escape_bytes(std::string_view bytes);

/// Sends the event's line to the system log (System::log_audit), filling the acting uid and
/// $SUDO_USER from `system` when the event leaves them unset.
void audit(System& system, AuditEvent event, std::optional<std::uint32_t> acting_uid = std::nullopt);

}  // namespace apnea_locks
