#include "apnea_locks/audit.h"

#include <fmt/format.h>

#include <cstdio>

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
  if (!event.label.empty()) line += fmt::format(" label={}", quoted(event.label));
  line += fmt::format(" uid={}", event.acting_uid);
  if (!event.acting_user.empty()) line += fmt::format(" user={}", quoted(event.acting_user));
  if (event.login_uid) {
    line += fmt::format(" login_uid={}", *event.login_uid);
    if (!event.login_user.empty()) line += fmt::format(" login_user={}", quoted(event.login_user));
  } else {
    line += " login_uid=none";
  }
  line += fmt::format(" for_uid={}", event.for_uid);
  if (!event.for_user.empty()) line += fmt::format(" for_user={}", quoted(event.for_user));
  return line;
}

AuditSink audit(System& system, AuditEvent event, std::optional<std::uint32_t> acting_uid) {
  event.acting_uid = acting_uid.value_or(system.uid());
  auto name_of = [&](std::uint32_t uid) {
    auto account = system.lookup_uid(uid);
    return account ? account->name : std::string();
  };
  event.acting_user = name_of(event.acting_uid);
  event.login_uid = system.login_uid();
  if (event.login_uid) event.login_user = name_of(*event.login_uid);
  const std::string line = detail::audit_line(event);
  const AuditSink sink = system.log_audit(line);
  if (sink != AuditSink::none) return sink;
  const std::string fallback =
      "apnea-locks: warning: no system log took the audit record (/dev/log, "
      "/run/systemd/journal/socket); it follows:\n" + line + "\n";
  const bool written = std::fputs(fallback.c_str(), stderr) >= 0 && std::fflush(stderr) == 0;
  return written ? AuditSink::standard_error : AuditSink::none;
}

}  // namespace apnea_locks
