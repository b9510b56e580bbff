// status/check --all-users (root): every account's lock area under the temp dir, each
// surveyed by a child process that has become that account for good (System::become, as
// `--user` does; a drop is irreversible, so one child per account). The child streams what
// it judged back as frames; the parent merges and renders. Which `apnea-*` entries are an
// account's area is the core's judgement (find_account_areas in lock_area.h).
#pragma once

#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "apnea_locks/lock_area.h"
#include "apnea_locks/system.h"
#include "cli/area.h"
#include "cli/summary.h"

namespace apnea_locks::cli {

/// One message from a surveying child: a type letter and its fields (any bytes).
struct Frame {
  char type = 0;
  std::vector<std::string> fields;
};

/// Writes frames to the parent (a pipe).
class FrameWriter {
 public:
  explicit FrameWriter(int fd) : fd_(fd) {}
  /// Sends one frame; a parent that went away ends the child.
  void send(char type, const std::vector<std::string>& fields);

 private:
  int fd_;
};

/// Adds `--all-users` to `options`.
void add_all_users_option(po::options_description& options, bool& all_users);

/// Adds the option groups status and check share, in their order: the label options (--repo
/// a filter), the timing options, the area options and `--all-users`.
void add_survey_options(po::options_description& options, LabelOptions& labels,
                        TimingOptions& timing, AreaOptions& area, bool& all_users);

/// The usage error of --all-users: not root ("--all-users needs root"), or given with
/// --user, --lock-dir or explicit paths (`paths`: the name of those, empty when none).
std::optional<CommandFailure> all_users_usage(System& system, const AreaOptions& area,
                                              std::string_view paths = {});

/// The user column's text: the account's name, or its uid when the name is empty.
std::string user_name(const AccountArea& area);

/// The lock area of `area`'s account as that account sees it (its own area, which may not
/// exist yet; its home), for the survey in the child that has become the account.
LockArea account_lock_area(const AccountArea& area);

/// One line for an `apnea-*` entry that is not surveyed: "ESCAPED-PATH: what is wrong".
std::string misfit_line(const AccountArea& area);

/// Runs `survey` in a child that has become `account` (unless this process is that uid
/// already), and calls `on_frame` in this process with each frame it sent, in order. The
/// child's output and exit go nowhere else. Fails with one line when the child could not be
/// started, could not become the account, or died without finishing.
std::expected<void, std::string> survey_as_account(
    System& system, const Account& account, const std::function<void(FrameWriter&)>& survey,
    const std::function<void(const Frame&)>& on_frame);

/// An AreaSummary as frame fields, and back.
std::vector<std::string> summary_fields(const AreaSummary& summary);
AreaSummary summary_from_fields(const std::vector<std::string>& fields);

/// Adds `from` to `into`: counts summed, the oldest lock and the worst next step kept.
void merge_summary(AreaSummary& into, const AreaSummary& from);

}  // namespace apnea_locks::cli
