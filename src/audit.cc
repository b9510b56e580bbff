#include "apnea_locks/audit.h"

#include <fmt/format.h>

#include "detail/audit.h"

namespace apnea_locks {

std::string escape_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (byte < 0x20 || byte >= 0x7f) out += fmt::format("\\x{:02x}", byte);
        else out += c;
    }
  }
  return out;
}

namespace {
std::string quoted(std::string_view text) { return "\"" + escape_bytes(text) + "\""; }
}  // namespace

std::string detail::audit_line(const AuditEvent& event) {
  std::string line = fmt::format("{} removed {} path={}", event.action, event.role, quoted(event.path));
  if (!event.tombstone.empty())
    line += fmt::format(" tombstone={}{}", quoted(event.tombstone), event.kept ? " kept" : "");
  if (event.owner_bytes) {
    // Escaped byte by byte up to the limit, so that no escape is ever cut.
    const std::string_view bytes = *event.owner_bytes;
    std::string owner;
    std::size_t taken = 0;
    for (; taken < bytes.size(); ++taken) {
      const std::string piece = escape_bytes(bytes.substr(taken, 1));
      if (owner.size() + piece.size() > audit_owner_limit) break;
      owner += piece;
    }
    if (taken < bytes.size()) owner += fmt::format("...({} bytes)", bytes.size());
    line += " owner=\"" + owner + "\"";
  } else {
    line += " owner=none";
  }
  line += fmt::format(" proof={}", quoted(event.proof));
  if (!event.trusts.empty()) line += fmt::format(" force_trusts={}", quoted(event.trusts));
  line += fmt::format(" uid={}", event.acting_uid);
  if (!event.sudo_user.empty()) line += fmt::format(" sudo_user={}", quoted(event.sudo_user));
  line += fmt::format(" for_uid={}", event.for_uid);
  if (!event.for_user.empty()) line += fmt::format(" for_user={}", quoted(event.for_user));
  return line;
}

void audit(System& system, AuditEvent event, std::optional<std::uint32_t> acting_uid) {
  event.acting_uid = acting_uid.value_or(system.uid());
  if (event.acting_uid == 0 && event.sudo_user.empty())
    event.sudo_user = system.env("SUDO_USER").value_or("");
  system.log_audit(detail::audit_line(event));
}

}  // namespace apnea_locks
