// Reading pasted text for `explain` (src/cli/apnea_message.h): Apnea's errors, the paths
// with the sentence's punctuation dropped, re-wrapped and quoted text, and the pids.
#include <doctest/doctest.h>

#include <string>

#include "apnea_locks/names.h"
#include "cli/apnea_message.h"

using namespace apnea_locks;
using namespace apnea_locks::cli;

namespace {

const std::string name = lock_name(LockKind::repository, lock_key(LockKind::repository, "/src/app"));
const std::string area = "/tmp/apnea-1000/operation-locks";
const std::string lock = area + "/" + name;

std::vector<std::string> ids(const PastedText& pasted) {
  std::vector<std::string> out;
  for (const ApneaError* error : pasted.errors) out.emplace_back(error->id);
  return out;
}

std::vector<std::string> paths(const PastedText& pasted) {
  std::vector<std::string> out;
  for (const FoundPath& found : pasted.paths) out.push_back(found.path);
  return out;
}

}  // namespace

TEST_CASE("each of Apnea's messages is recognised, with its lock path and pid") {
  const PastedText stale = read_pasted("Apnea lock owner pid 4242 is not live at " + lock +
                                       ". Automatic stale cleanup is disabled. Verify no Apnea process owns it, "
                                       "then Remove this lock directory manually: " + lock);
  CHECK(ids(stale) == std::vector<std::string>{"stale"});
  CHECK(paths(stale) == std::vector<std::string>{lock});
  CHECK(stale.pids == std::vector<std::string>{"4242"});

  const PastedText live = read_pasted("another Apnea operation holds " + lock + " for /src/app (pid 77)");
  CHECK(ids(live) == std::vector<std::string>{"live"});
  CHECK(paths(live) == std::vector<std::string>{lock});
  CHECK(live.pids == std::vector<std::string>{"77"});

  const PastedText guarded = read_pasted("Apnea stale-lock reclamation is guarded at " + lock +
                                         ".reclaim. Retry after the other operation completes. If the guard "
                                         "persists, stop all Apnea processes using " + lock +
                                         ", then remove this guard directory manually: " + lock + ".reclaim");
  CHECK(ids(guarded) == std::vector<std::string>{"guarded"});
  CHECK(paths(guarded) == std::vector<std::string>{lock + ".reclaim", lock});

  CHECK(ids(read_pasted("Apnea lock metadata is malformed at " + lock + ". Automatic cleanup is disabled.")) ==
        std::vector<std::string>{"malformed"});
  CHECK(ids(read_pasted("Apnea lock changed repeatedly at " + lock + "; retry the operation")) ==
        std::vector<std::string>{"raced"});
  CHECK(ids(read_pasted("Remove this lock directory manually: " + lock)) ==
        std::vector<std::string>{"remove-manually"});

  const PastedText owned = read_pasted("ConfigError: Apnea lock directory is not owned by the current user: "
                                       "/tmp/apnea-1000.");
  CHECK(ids(owned) == std::vector<std::string>{"not-owned"});
  REQUIRE(owned.paths.size() == 1);
  CHECK(owned.paths[0].path == "/tmp/apnea-1000");
  CHECK(owned.paths[0].area);
  CHECK(ids(read_pasted("unsafe Apnea lock directory: /tmp/apnea-0/operation-locks")) ==
        std::vector<std::string>{"unsafe"});
  CHECK(ids(read_pasted("could not acquire Apnea operation lock: EACCES")) ==
        std::vector<std::string>{"acquire-failed"});
  CHECK(read_pasted("hello").errors.empty());
}

TEST_CASE("punctuation, quotes and re-wrapping are not part of a path") {
  for (const std::string& around : {"(" + lock + ")", "`" + lock + "`.", "'" + lock + "',", "\"" + lock + "\";",
                                    "<" + lock + ">", lock + "...", lock + ":"}) {
    CAPTURE(around);
    CHECK(paths(read_pasted("see " + around + " now")) == std::vector<std::string>{lock});
  }
  // Quoted and re-wrapped: the phrases across lines, the path cut inside its name.
  const std::string text = "> > Apnea lock\n> > owner pid 12 is not\n> > live at " + lock.substr(0, 60) + "\n> > " +
                           lock.substr(60) + ". Automatic\n> > stale-\n> > lock";
  const PastedText wrapped = read_pasted(text);
  CHECK(ids(wrapped) == std::vector<std::string>{"stale"});
  REQUIRE(!wrapped.paths.empty());
  CHECK(wrapped.paths[0].path == lock);
  // A TMPDIR with a space: the path goes back to the word that starts with '/'.
  const std::string spaced = "/home/ann/my tmp/apnea-1000/operation-locks/" + name;
  CHECK(paths(read_pasted("holds " + spaced + " for /src")) == std::vector<std::string>{spaced});
  // A bare name, candidates and tombstones; a name inside another word is none.
  CHECK(paths(read_pasted("entry " + name + ".candidate.ab-12, " + name + ".tombstone.cd-34.")) ==
        std::vector<std::string>{name + ".candidate.ab-12", name + ".tombstone.cd-34"});
  CHECK(read_pasted("x" + name).paths.empty());
  CHECK(read_pasted(name.substr(0, 40) + ".lock").paths.empty());
}

TEST_CASE("pids: each once, in order, in the forms a ticket has") {
  CHECK(read_pasted("pid 5, PID: 6, pid=7, pid #8, pid 5 again, rapid 9, pid 10x").pids ==
        std::vector<std::string>{"5", "6", "7", "8"});
}

TEST_CASE("a control byte ends a path: what is printed is what is judged") {
  // A NUL (lstat would stop at it), an ESC, a DEL: word breaks, never part of the path.
  for (char c : {'\0', '\x1b', '\x7f', '\x01'}) {
    CAPTURE(static_cast<int>(c));
    const std::string text = std::string("/home/u/x") + c + lock;
    CHECK(paths(read_pasted(text)) == std::vector<std::string>{lock});
  }
}

TEST_CASE("quotes of any script before a path are not part of it; a relative path stays relative") {
  CHECK(paths(read_pasted("see \xe2\x80\x9c" + lock + "\xe2\x80\x9d now")) == std::vector<std::string>{lock});
  CHECK(paths(read_pasted("see \xc2\xab" + lock + "\xc2\xbb")) == std::vector<std::string>{lock});
  // Not made absolute from its inner '/': explain refuses it rather than guess.
  CHECK(paths(read_pasted("in tmp/x/" + name)) == std::vector<std::string>{"tmp/x/" + name});
}

TEST_CASE("a re-wrap after a whole candidate name invents no entry") {
  const PastedText pasted = read_pasted("holds " + lock + ".candidate.ab12\nThanks, Ann");
  CHECK(paths(pasted) == std::vector<std::string>{lock + ".candidate.ab12"});
  // A name cut by a re-wrap is still joined again.
  const PastedText cut = read_pasted("holds " + lock.substr(0, 70) + "\n" + lock.substr(70) + " now");
  REQUIRE(!cut.paths.empty());
  CHECK(cut.paths[0].path == lock);
}

TEST_CASE("a large paste: bounded, at most 64 paths, the cap reported") {
  // One lock path a line, 256 KiB of them: each line holds a whole name, so none is glued
  // to the next, and only the first max_pasted_paths are kept.
  std::string text;
  std::vector<std::string> locks;
  for (int i = 0; text.size() + 200 < max_pasted_bytes; ++i) {
    locks.push_back(area + "/" + lock_name(LockKind::repository, lock_key(LockKind::repository, "/src/" + std::to_string(i))));
    text += locks.back() + "\n";
  }
  const PastedText pasted = read_pasted(text);
  REQUIRE(pasted.paths.size() == max_pasted_paths);
  CHECK(pasted.more_paths);
  CHECK(pasted.paths.front().path == locks.front());
  CHECK(pasted.paths.back().path == locks[max_pasted_paths - 1]);
  for (const FoundPath& found : pasted.paths) CHECK(found.alternatives.empty());
  CHECK_FALSE(read_pasted("at " + lock).more_paths);
}

TEST_CASE("a directory longer than PATH_MAX is no path") {
  CHECK(read_pasted("/" + std::string(5000, 'a') + "/" + name).paths.empty());
  const std::string long_ok = "/" + std::string(4000, 'a') + "/" + name;
  CHECK(paths(read_pasted(long_ok)) == std::vector<std::string>{long_ok});
}

TEST_CASE("pids: at most 64, so a long paste of them stays linear") {
  std::string text;
  for (int i = 1; text.size() + 16 < max_pasted_bytes; ++i) text += "pid " + std::to_string(i) + ", ";
  const PastedText pasted = read_pasted(text);
  CHECK(pasted.pids.size() == max_pasted_paths);
  CHECK(pasted.pids.front() == "1");
}
