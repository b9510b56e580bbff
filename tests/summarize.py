#!/usr/bin/env python3
"""Summarise one `meson test` run from its testlog.json, counting real test cases.

A meson test whose output has a doctest summary line
("[doctest] test cases: 57 | 57 passed | 0 failed | 2 skipped") contributes that
line's counts; any other test counts once (OK and EXPECTEDFAIL as passed, SKIP as
skipped, anything else as failed). A test that meson saw fail counts as at least one
failure even when its doctest summary is missing or says 0 failed (a crash, a
sanitizer report at exit, a timeout).

The last line printed is always "N passed, N failed" (plus ", N skipped" when N > 0).
Exit status: 1 when anything failed, else 0.

Usage: summarize.py [--meson-rc N] [--label TEXT] TESTLOG_JSON
"""

import argparse
import os
import signal
import json
import re
import sys

DOCTEST_SUMMARY = re.compile(
    r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed"
    r"(?:\s*\|\s*(\d+) skipped)?")
# tests/doctest_run.h's count of the cases marked doctest::skip in the files it ran; doctest's
# own "skipped" also counts the cases of every other file in the same program.
SKIPPED_HERE = re.compile(r"\[doctest\] skipped in the files run: (\d+)")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PASSED_RESULTS = {"OK", "EXPECTEDFAIL"}
INTEROP_BANNER = "INTEROP SUITE SKIPPED: set APNEA_REFERENCE=/abs/path/to/apnea-peer"


def doctest_counts(output):
    """(passed, failed, skipped) from the last doctest summary line, or None."""
    matches = DOCTEST_SUMMARY.findall(ANSI.sub("", output))
    if not matches:
        return None
    _, passed, failed, skipped = matches[-1]
    here = SKIPPED_HERE.findall(ANSI.sub("", output))
    return int(passed), int(failed), int(here[-1] if here else skipped or 0)


def split_name(pretty):
    """meson's pretty name ("project:suite1+suite2 / name", or "name") -> (suites, name)."""
    if " / " not in pretty:
        return [], pretty
    prefix, name = pretty.rsplit(" / ", 1)
    suites = prefix.split(":", 1)[1].split("+") if ":" in prefix else []
    return suites, name


def is_interop(pretty):
    suites, name = split_name(pretty)
    return name == "interop" or "interop" in suites


def count(entry):
    """(passed, failed, skipped) for one testlog entry."""
    result = entry.get("result", "ERROR")
    if result == "SKIP":
        return 0, 0, 1
    found = doctest_counts((entry.get("stdout") or "") + "\n" + (entry.get("stderr") or ""))
    if found is None:
        return (1, 0, 0) if result in PASSED_RESULTS else (0, 1, 0)
    passed, failed, skipped = found
    if result not in PASSED_RESULTS:
        failed = max(failed, 1)
    return passed, failed, skipped


def fmt_counts(passed, failed, skipped):
    text = f"{passed} passed, {failed} failed"
    return text + (f", {skipped} skipped" if skipped else "")


def read_log(path):
    entries = []
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            for line in log:
                line = line.strip()
                if line:
                    entries.append(json.loads(line))
    except FileNotFoundError:
        pass
    return entries


def leftover_processes(marker):
    """Processes still alive whose environment holds `marker` (KEY=VALUE, which meson gives
    every test): what a test left behind. Each is killed; (pid, command line) of each."""
    found = []
    wanted = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if wanted not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                words = cmdline.read().split(b"\0")
        except OSError:
            continue  # gone, or not ours to read
        command = " ".join(w.decode(errors="backslashreplace") for w in words if w)
        found.append((int(name), command))
    for pid, _ in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("testlog")
    parser.add_argument("--meson-rc", type=int, default=0,
                        help="exit status of `meson test`; non-zero counts as a failure")
    parser.add_argument("--label", default="", help="shown in the heading")
    parser.add_argument("--leftovers", metavar="KEY=VALUE",
                        help="after the run, a process whose environment holds KEY=VALUE "
                             "(the tests' own) is left behind: listed, killed, one failure")
    args = parser.parse_args()

    entries = read_log(args.testlog)
    total = [0, 0, 0]
    interop_skipped = False
    print()
    print(f"Summary{f' ({args.label})' if args.label else ''}:")
    if not entries:
        print("  no test ran")
    width = max((len(e.get("name", "?")) for e in entries), default=0)
    for entry in entries:
        name = entry.get("name", "?")
        result = entry.get("result", "ERROR")
        counts = count(entry)
        for i, n in enumerate(counts):
            total[i] += n
        if result == "SKIP" and is_interop(name):
            interop_skipped = True
        print(f"  {result:<12} {name:<{width}}  {fmt_counts(*counts)}")

    if args.meson_rc != 0 and total[1] == 0:
        print(f"  meson test exited with status {args.meson_rc} and no test failed: "
              "counted as one failure")
        total[1] = 1

    if args.leftovers:
        left = leftover_processes(args.leftovers)
        if left:
            print(f"  LEFT BEHIND  {len(left)} process(es) of the tests still ran after them "
                  "(killed now):")
            for pid, command in left:
                print(f"    pid {pid}: {command}")
            total[1] += 1

    if interop_skipped:
        bar = "!" * (len(INTEROP_BANNER) + 8)
        print(f"\n{bar}\n!!! {INTEROP_BANNER} !!!\n{bar}\n")

    print(fmt_counts(*total))
    return 1 if total[1] else 0


if __name__ == "__main__":
    sys.exit(main())
