// OpenSSL's SHA-256 without EVP: EVP's first digest in a process builds the provider name
// map (some 6 M instructions, ~3 ms), which every status of a non-empty area, every run and
// every acquire by path would pay for two short hashes; the SHA256_* calls go straight to
// OpenSSL's own SHA-256 code and link only it. They are deprecated in OpenSSL 3.0 in favour
// of EVP, hence the 1.1.1 API level for this file.
#define OPENSSL_API_COMPAT 10101
#include "apnea_locks/names.h"

#include <openssl/sha.h>

#include <array>
#include <memory>

#include "apnea_locks/lock_area.h"

namespace apnea_locks {

std::string_view role_suffix(EntryRole role) {
  switch (role) {
    case EntryRole::reclaim_guard: return guard_suffix;
    case EntryRole::candidate: return candidate_infix;
    case EntryRole::tombstone: return tombstone_infix;
    case EntryRole::lock:
    case EntryRole::unknown: break;
  }
  return {};
}

std::string reclaim_guard_path(std::string_view lock) {
  return std::string(lock) + std::string(guard_suffix);
}

std::string candidate_path(std::string_view lock, std::string_view token) {
  return std::string(lock) + std::string(candidate_infix) + std::string(token);
}

std::string tombstone_path(std::string_view lock, std::string_view uuid) {
  return std::string(lock) + std::string(tombstone_infix) + std::string(uuid);
}


std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256_CTX context;
  SHA256_Init(&context);
  SHA256_Update(&context, bytes.data(), bytes.size());
  SHA256_Final(digest.data(), &context);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(2 * digest.size(), '\0');
  for (std::size_t i = 0; i < digest.size(); ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

std::string_view kind_name(LockKind kind) {
  switch (kind) {
    case LockKind::repository: return "repository";
    case LockKind::global_setup: return "global-setup";
    case LockKind::unknown: break;
  }
  return "unknown";
}

std::string_view role_name(EntryRole role) {
  switch (role) {
    case EntryRole::lock: return "lock";
    case EntryRole::candidate: return "candidate";
    case EntryRole::tombstone: return "tombstone";
    case EntryRole::reclaim_guard: return "reclaim-guard";
    case EntryRole::unknown: break;
  }
  return "unknown";
}

std::string lock_key(LockKind kind, std::string_view canonical_path) {
  std::string input(kind_name(kind));
  input += '\0';
  input += canonical_path;
  return sha256_hex(input);
}

std::string lock_name(LockKind kind, std::string_view key) {
  const std::string_view prefix = kind_name(kind);
  std::string name;
  name.reserve(prefix.size() + key.size() + 6);
  name.append(prefix).append("-").append(key).append(lock_name_suffix);
  return name;
}

LocatedLock canonical_lock(std::string_view lock_directory, LockKind kind, std::string canonical) {
  LocatedLock lock;
  lock.kind = kind;
  lock.name = lock_name(kind, lock_key(kind, canonical));
  lock.path = node_join(lock_directory, lock.name);
  lock.root = std::move(canonical);
  return lock;
}

SysResult<LocatedLock> locate_lock(System& system, const std::string& lock_directory,
                                   LockKind kind, const std::string& root) {
  auto canonical = system.realpath(root);
  if (!canonical) return std::unexpected(canonical.error());
  return canonical_lock(lock_directory, kind, std::move(*canonical));
}

bool is_lock_key(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

SysResult<std::string> repository_lock_path(System& system, const std::string& lock_directory,
                                            const std::string& root) {
  auto lock = locate_lock(system, lock_directory, LockKind::repository, root);
  if (!lock) return std::unexpected(lock.error());
  return std::move(lock->path);
}

SysResult<std::string> global_setup_lock_path(System& system, const std::string& lock_directory,
                                              const std::string& home) {
  auto lock = locate_lock(system, lock_directory, LockKind::global_setup, home);
  if (!lock) return std::unexpected(lock.error());
  return std::move(lock->path);
}

std::string EntryName::lock_name() const {
  if (kind == LockKind::unknown) return {};
  return apnea_locks::lock_name(kind, key);
}

std::string_view lock_name_view(std::string_view name, const EntryName& parsed, std::string& scratch) {
  if (parsed.kind == LockKind::unknown) return {};
  const std::string_view prefix = kind_name(parsed.kind);
  const std::size_t size = prefix.size() + 1 + parsed.key.size() + lock_name_suffix.size();
  if (name.size() >= size && name.starts_with(prefix) && name[prefix.size()] == '-' &&
      name.substr(prefix.size() + 1, parsed.key.size()) == parsed.key &&
      name.substr(size - lock_name_suffix.size(), lock_name_suffix.size()) == lock_name_suffix)
    return name.substr(0, size);
  scratch = parsed.lock_name();
  return scratch;
}

EntryName parse_entry_name(std::string_view name) {
  EntryName out;
  LockKind kind = LockKind::unknown;
  std::string_view rest;
  for (LockKind candidate : {LockKind::repository, LockKind::global_setup}) {
    const std::string_view prefix = kind_name(candidate);  // then '-'
    if (name.size() > prefix.size() && name.starts_with(prefix) && name[prefix.size()] == '-') {
      kind = candidate;
      rest = name.substr(prefix.size() + 1);
      break;
    }
  }
  if (kind == LockKind::unknown || rest.size() < 64 + 5) return out;
  std::string_view key = rest.substr(0, 64);
  if (!is_lock_key(key) || rest.substr(64, 5) != lock_name_suffix) return out;
  std::string_view tail = rest.substr(69);
  EntryRole role = EntryRole::unknown;
  std::string_view suffix;
  if (tail.empty()) {
    role = EntryRole::lock;
  } else if (tail == guard_suffix) {
    role = EntryRole::reclaim_guard;
  } else if (tail.starts_with(candidate_infix) && tail.size() > candidate_infix.size()) {
    role = EntryRole::candidate;
    suffix = tail.substr(11);
  } else if (tail.starts_with(tombstone_infix) && tail.size() > tombstone_infix.size()) {
    role = EntryRole::tombstone;
    suffix = tail.substr(11);
  } else {
    return out;
  }
  out.kind = kind;
  out.role = role;
  out.key = std::string(key);
  out.suffix = std::string(suffix);
  return out;
}

}  // namespace apnea_locks
