// Fuzz target: the lock-directory entry-name parser (parse_entry_name).
// Invariants: nothing crashes; parsing is deterministic; an unknown entry carries no kind,
// key or suffix; a recognised entry has a kind, a 64-digit lowercase hex key, a suffix
// exactly when it is a candidate or tombstone, its lock_name() parses back as that lock,
// and lock_name() plus its role's ending rebuilds the input byte for byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "apnea_locks/names.h"
#include "fuzz_support.h"

using apnea_locks::EntryName;
using apnea_locks::EntryRole;
using apnea_locks::LockKind;
using apnea_locks::parse_entry_name;
using apnea_locks::fuzz::require;

namespace {

bool lowercase_hex64(std::string_view key) {
  if (key.size() != 64) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool same(const EntryName& a, const EntryName& b) {
  return a.kind == b.kind && a.role == b.role && a.key == b.key && a.suffix == b.suffix;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view name(reinterpret_cast<const char*>(data), size);
  const EntryName entry = parse_entry_name(name);
  require(same(entry, parse_entry_name(name)), "parse_entry_name is deterministic", name);

  if (entry.role == EntryRole::unknown) {
    require(entry.kind == LockKind::unknown && entry.key.empty() && entry.suffix.empty() &&
                entry.lock_name().empty(),
            "an unknown entry has no kind, key, suffix or lock", name);
    return 0;
  }
  require(entry.kind != LockKind::unknown, "a recognised entry has a lock kind", name);
  require(lowercase_hex64(entry.key), "a recognised key is 64 lowercase hex digits", name);
  const bool has_suffix = entry.role == EntryRole::candidate || entry.role == EntryRole::tombstone;
  require(entry.suffix.empty() != has_suffix, "a suffix exactly for candidates and tombstones",
          name);

  const std::string lock = entry.lock_name();
  const EntryName parent = parse_entry_name(lock);
  require(parent.role == EntryRole::lock && parent.kind == entry.kind && parent.key == entry.key &&
              parent.suffix.empty(),
          "lock_name() parses back as the lock", name);

  std::string rebuilt = lock;
  switch (entry.role) {
    case EntryRole::lock: break;
    case EntryRole::reclaim_guard: rebuilt += ".reclaim"; break;
    case EntryRole::candidate: rebuilt += ".candidate." + entry.suffix; break;
    case EntryRole::tombstone: rebuilt += ".tombstone." + entry.suffix; break;
    case EntryRole::unknown: break;
  }
  require(rebuilt == name, "lock_name() plus the role's ending rebuilds the name", name);
  return 0;
}
