// The JSON Schema validator the tests check every apnea-locks JSON document with
// (tests/json_schema.h), and docs/apnea-locks.schema.json itself: every $ref resolves, and
// documents that break it in each way the schema forbids are refused.
#include <doctest/doctest.h>

#include <boost/json.hpp>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "json_schema.h"

using namespace apnea_locks::testing;
namespace json = boost::json;

namespace {

/// A whole, valid status document with one entry (as status -J writes it).
json::value status_document() {
  return json::parse(R"({
    "schema": {"name": "status", "version": 1},
    "lock_dir": "/tmp/apnea-0/operation-locks",
    "area": {"check": "ok", "path": "/tmp/apnea-0/operation-locks", "message": "lock area is safe"},
    "columns": null,
    "entries": [{
      "kind": "repository", "key": "8d24", "role": "lock", "state": "stale", "reason": "pid-dead",
      "apnea_verdict": "stale", "pid": 4242, "token": "t", "age_ms": 5000, "command": null,
      "started": null, "label": "/src/app", "fix": "apnea-locks reclaim --repo /src/app",
      "fix_argv": ["apnea-locks", "reclaim", "--repo", "/src/app"], "written": "2026-01-01T00:00:00.000Z",
      "name": "repository-8d24.lock", "path": "/tmp/apnea-0/operation-locks/repository-8d24.lock",
      "needs_attention": true, "apnea_self_heals": false, "certain": true, "guard": "none",
      "proof": "certain", "proof_name": "pid-dead", "decision": "remove", "decision_why": "pid-dead",
      "next_step": null, "force_required": false, "clock_void": false,
      "lock_name": "repository-8d24.lock", "suffix": null, "type": "directory",
      "mtime": "2026-01-01T00:00:00.000Z", "user": null, "named_pids": [4242], "blocker": null,
      "owner_error": null,
      "process": {"signal": "ESRCH", "exists": false, "state": null, "uid": null, "tgid": null,
                  "start_time": null, "command": null}
    }],
    "summary": {"scanned": 1, "entries": 1, "needs_attention": 1, "states": {"stale": 1},
                "roles": {"lock": 1},
                "next": {"name": "repository-8d24.lock", "path": "/x", "description": "the repository lock of /src/app",
                         "state": "stale", "reason": "pid-dead", "fix": "apnea-locks reclaim --repo /src/app",
                         "fix_argv": ["apnea-locks", "reclaim", "--repo", "/src/app"], "next_step": null,
                         "why": "pid-dead"}},
    "hints": [],
    "error": null
  })");
}

/// `document` changed by `edit`.
json::value edited(json::value document, const std::function<void(json::object&)>& edit) {
  edit(document.as_object());
  return document;
}

json::object& first_entry(json::object& doc) { return doc["entries"].as_array()[0].as_object(); }

/// Collects every "$ref" of a schema.
void refs(const json::value& value, std::vector<std::string>& out) {
  if (value.is_object()) {
    for (const auto& member : value.as_object()) {
      if (member.key() == "$ref") out.emplace_back(member.value().as_string());
      refs(member.value(), out);
    }
  } else if (value.is_array()) {
    for (const auto& item : value.as_array()) refs(item, out);
  }
}

}  // namespace

TEST_CASE("the schema file: every $ref resolves, every keyword is one the validator knows") {
  const char* source = std::getenv("APNEA_LOCKS_SOURCE");
  REQUIRE(source != nullptr);
  std::ifstream in(std::string(source) + "/docs/apnea-locks.schema.json");
  const json::value root = json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  std::vector<std::string> found;
  refs(root, found);
  CHECK(found.size() > 20);
  for (const std::string& ref : found) {
    CAPTURE(ref);
    // An empty object validates against any resolvable schema only when that schema allows
    // it; what matters here is that the reference resolves.
    for (const std::string& problem : apnea_locks_schema().validate(json::object{}, ref))
      CHECK(problem.find("no schema at") == std::string::npos);
  }
  // A null is not an object: the definitions of documents refuse it, with no keyword errors.
  for (const char* document : {"status", "inspect", "explain", "path", "reclaim", "run_event"}) {
    CAPTURE(document);
    const auto problems = apnea_locks_schema().validate(nullptr, std::string("#/$defs/") + document);
    CHECK(!problems.empty());
    for (const std::string& problem : problems) CHECK(problem.find("unsupported keyword") == std::string::npos);
  }
}

TEST_CASE("a valid status document passes; each way of breaking it is refused") {
  CHECK(schema_problems(status_document()).empty());
  const std::vector<std::pair<const char*, std::function<void(json::object&)>>> breaks = {
      {"no schema member", [](json::object& d) { d.erase("schema"); }},
      {"a future version", [](json::object& d) { d["schema"].as_object()["version"] = 2; }},
      {"a missing member", [](json::object& d) { d.erase("hints"); }},
      {"an unknown member", [](json::object& d) { d["extra"] = 1; }},
      {"an unknown state", [](json::object& d) { first_entry(d)["state"] = "dead"; }},
      {"a fix as a number", [](json::object& d) { first_entry(d)["fix"] = 5; }},
      {"an empty fix_argv", [](json::object& d) { first_entry(d)["fix_argv"] = json::array(); }},
      {"a whole entry missing fix_argv", [](json::object& d) { first_entry(d).erase("fix_argv"); }},
      {"a negative count", [](json::object& d) { d["summary"].as_object()["entries"] = -1; }},
      {"a hint of an unknown kind",
       [](json::object& d) {
         d["hints"] = json::parse(R"([{"kind": "other", "message": "m", "lock_path": "p", "root": "r",
                                      "state": "stale", "reason": "x", "fix": null, "fix_argv": null,
                                      "next_step": null}])");
       }},
      {"an unknown column", [](json::object& d) { d["columns"] = json::parse(R"(["bogus"])"); }},
      // An absent next step is null, never "" (issue 32), wherever a next_step is written.
      {"an empty next_step", [](json::object& d) { first_entry(d)["next_step"] = ""; }},
      {"an empty next step in the summary",
       [](json::object& d) { d["summary"].as_object()["next"].as_object()["next_step"] = ""; }},
  };
  for (const auto& [what, edit] : breaks) {
    CAPTURE(what);
    CHECK_FALSE(schema_problems(edited(status_document(), edit)).empty());
  }
}

TEST_CASE("-J -o: chosen columns make partial entries valid, and only then") {
  auto partial = edited(status_document(), [](json::object& d) {
    d["columns"] = json::parse(R"(["state", "pid"])");
    d["entries"] = json::parse(R"([{"state": "live", "pid": 7}])");
  });
  CHECK(schema_problems(partial).empty());
  auto no_columns = edited(partial, [](json::object& d) { d["columns"] = nullptr; });
  CHECK_FALSE(schema_problems(no_columns).empty());  // null columns: whole entries
}

TEST_CASE("run events: known events need their members, every line its schema") {
  CHECK(schema_problems(json::parse(
            R"({"schema": {"name": "run-event", "version": 1}, "event": "signal", "signal": "SIGTERM", "forwarded": true})"))
            .empty());
  CHECK_FALSE(schema_problems(json::parse(
                  R"({"schema": {"name": "run-event", "version": 1}, "event": "signal", "signal": "SIGTERM"})"))
                  .empty());
  CHECK_FALSE(schema_problems(json::parse(R"({"event": "signal", "signal": "SIGTERM", "forwarded": true})")).empty());
  CHECK_FALSE(schema_problems(json::parse(
                  R"({"schema": {"name": "run-event", "version": 1}, "event": "refused", "message": "m",
                      "exit_status": 76, "error": "OperationLocked", "fix": "x", "fix_argv": []})"))
                  .empty());
  // An absent next step is null, never "".
  const std::string refused =
      R"({"schema": {"name": "run-event", "version": 1}, "event": "refused", "message": "m",
          "exit_status": 76, "error": "OperationLocked", "fix": "x", "fix_argv": ["x"], "next_step": )";
  CHECK(schema_problems(json::parse(refused + "null}")).empty());
  CHECK(schema_problems(json::parse(refused + R"("wait")" + "}")).empty());
  CHECK_FALSE(schema_problems(json::parse(refused + R"("")" + "}")).empty());
}

TEST_CASE("the validator reports a keyword it does not know instead of ignoring it") {
  const JsonSchema schema(json::parse(R"({"type": "object", "patternProperties": {"a": {}}})"));
  const auto problems = schema.validate(json::object{});
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("unsupported keyword patternProperties") != std::string::npos);
}
