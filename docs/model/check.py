#!/usr/bin/env python3
"""Model-checks docs/model/lock.pml with Spin (see docs/model/README.md).

  check.py --ci        every property configuration marked CI, and every mutant and trust
                       boundary searched afresh: each must produce a violation of the property
                       it names, and its control (the same configuration with the mutant
                       switched off, or the trust kept) must hold: the meson test `model`
  check.py --meta      the check of the check: on temporary copies of lock.pml, every
                       assertion neutralised (assert -> skip), then each property in turn made
                       vacuous (its P<n>_BAD condition false); each copy must fail --ci's
                       searches that rely on it: the meson test `model-meta`
  check.py --full      everything: --ci, plus the big property configurations (exhaustive, or
                       bitstate with a stated coverage where exhaustive does not fit) and the
                       liveness checks: `scripts/dev model` (minutes, GBs)
  check.py --record    searches every mutant and trust boundary for a short counterexample
                       and rewrites docs/model/trails/ (after a model change)
  check.py --list      the configurations and their -D switches

Options: --only NAME[,NAME...] runs those configurations alone; --keep DIR keeps the build
directories in DIR; --memlim MB caps each verifier's memory (default 7000); --model FILE
checks another copy of the model (what --meta does).

A verifier's result counts only when pan printed its statistics ("states, stored",
"errors: N", "depth reached"); a search cut by the depth bound ("max search depth too small")
or by memory ("out of memory", the -DMEMLIM bound) is a failure, never a pass. A violation
counts only when pan itself reports it (errors >= 1 and "assertion violated !(p<n>_violated)"
naming the expected property, or "acceptance cycle" for a liveness claim), and `spin -t` of
that fresh trail prints the same property's MODEL line. Recorded trails (trails/) are
documentation: no check replays them as proof.

Without spin or a C compiler the check is skipped (exit 77, meson's SKIP) with a message.
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "lock.pml"
TRAILS = HERE / "trails"
SKIP = 77
PROPERTIES = ("P1", "P2", "P3", "P3R", "P4", "P5", "P6")


@dataclass
class Config:
    name: str
    defines: dict
    expect: str          # "pass", or the property whose violation it must show ("P2", "L1", ...)
    kind: str            # "property", "mutant", "boundary", "liveness"
    what: str
    ci: bool = False     # part of --ci (and so of --meta)
    hash_bits: int = 22
    control: dict | None = None   # mutants/boundaries: the overrides that make it hold
    bitstate: bool = False        # -DBITSTATE: a partial search, reported with its coverage
    ltl: str = ""                 # liveness: the never claim's name (-N), searched with -a -f
    shorten_seconds: int = 30     # --record: time to look for a shorter counterexample
    pan_args: tuple = ()          # more pan options (--meta's cut searches)


def control_of(cfg):
    """The control of a mutant or boundary: a property configuration that must hold."""
    # (ONLY_P1 dropped: the control must hold every property, not only the one named)
    defines = {**cfg.defines, **cfg.control, "ONLY_P1": None}
    defines = {k: v for k, v in defines.items() if v is not None}
    return Config(f"{cfg.name}/control", defines, "pass", "control",
                  f"control of {cfg.name}: {cfg.what}", ci=cfg.ci, hash_bits=cfg.hash_bits,
                  ltl=cfg.ltl)


MAIN = {"NA": 2, "NR": 1}
LIVE_BASE = {"LIVE": 1, "NA": 2, "FLAV0": "RUN", "FLAV1": "REF", "NR": 1, "FORCE": 1, "INIT": 1,
             "ATT": 1, "MAXKILL": 1, "PAUSE": 0}
# A dead lock and a leftover guard of a crashed reclamation; `run` and two reclaim --force.
TWO_RECLAIMS_SMALL = {"NA": 1, "FLAV0": "RUN", "NR": 2, "RSTEPS2": 1, "FORCE": 1, "INIT": 2,
                      "TICKS": 0, "ATT": 1, "MAXKILL": 0, "PAUSE": 0}
# The paused-holder filter and the clock (CLOCK_READINGS): Apnea reclaims a dead lock under a
# guard and may be stopped there; reclaim --force; two clock steps, small forward (30 or 60 s,
# undetected) and big forward (90 s, detected unless an earlier backward step hides it). The
# fake clock evidence of an undetected step is boundary-clock-step's subject (kept out here).
GUARD_CLOCK = {"NA": 1, "NR": 1, "FORCE": 1, "INIT": 1, "ATT": 1, "MAXKILL": 0, "STEPS": 3,
               "MAXSTEP": 3, "FAKE_EVIDENCE": 0}
CONFIGS = [
    # ---- properties: every one must hold
    Config("plain", {**MAIN, "FORCE": 0, "PAUSE": 2, "STEPS": 7}, "pass", "property",
           "Apnea 0.2.2 + run + reclaim; crashes, pauses resumed at any time, every clock step",
           hash_bits=27),
    Config("force", {**MAIN, "FORCE": 1, "PAUSE": 1, "PAUSE_WRITE": 1}, "pass", "property",
           "Apnea 0.2.2 + run + reclaim --force, within --force's trusts", hash_bits=26),
    Config("force-other-writer", {"NA": 2, "FLAV1": "FOREIGN", "NR": 1, "FORCE": 1, "PAUSE": 1,
                                  "PAUSE_WRITE": 1}, "pass", "property",
           "Apnea 0.2.2 + a writer of malformed records + reclaim --force", hash_bits=26),
    Config("two-reclaims", {"NA": 2, "FLAV0": "RUN", "FLAV1": "REF", "NR": 2, "RSTEPS2": 1,
                            "FORCE": 1, "INIT": 2, "TICKS": 0, "ATT": 1, "MAXKILL": 0,
                            "PAUSE": 0}, "pass", "property",
           "a dead lock and a leftover guard; run + Apnea 0.2.2 + two reclaim --force",
           hash_bits=26),
    Config("two-reclaims-crashes", {"NA": 1, "FLAV0": "RUN", "NR": 2, "RSTEPS2": 1, "FORCE": 1,
                                    "INIT": 2, "ATT": 2, "MAXKILL": 2, "PAUSE": 1},
           "pass", "property",
           "a dead lock and a leftover guard; run + two reclaim --force, 2 crashes, a pause "
           "(bitstate)", hash_bits=33, bitstate=True),
    Config("three-apneas", {"NA": 3, "FLAV0": "REF", "FLAV1": "RUN", "FLAV2": "REF", "NR": 1,
                            "FORCE": 1, "ATT": 1, "MAXKILL": 1, "PAUSE": 1},
           "pass", "property",
           "Apnea 0.2.2 + run + Apnea 0.2.2 (one attempt each) + reclaim --force, a crash, a pause "
           "(bitstate)",
           hash_bits=33, bitstate=True),
    Config("ci-force", {"NA": 1, "NR": 1, "FORCE": 1, "INIT": 2, "PAUSE": 1, "PAUSE_WRITE": 1},
           "pass", "property", "CI: a dead lock and a leftover guard; Apnea + reclaim --force",
           ci=True),
    Config("ci-mixed", {"NA": 2, "NR": 1, "ATT": 1, "FORCE": 1, "MAXKILL": 1, "PAUSE": 1},
           "pass", "property", "CI: Apnea 0.2.2 + run (one attempt) + reclaim --force, one crash",
           ci=True),
    Config("ci-two-reclaims-reuse-free", {**TWO_RECLAIMS_SMALL, "GUARD_REUSE": 0,
                                          "MUT_NO_REDECIDE": 1}, "pass", "property",
           "CI: without inode reuse the re-decision under the guard is not needed (why the old "
           "model missed it)", ci=True),
    Config("ci-guard-clock", {**GUARD_CLOCK}, "pass", "property",
           "CI: the paused-holder filter's 60 s margin: no forward clock step (small, or big and "
           "detected; two of them) makes a stopped guard holder look younger than its guard",
           ci=True),
    # ---- mutants of the protocol or of the code: each must produce a counterexample
    Config("mutant-force-malformed", {"NA": 2, "FLAV1": "FOREIGN", "NR": 1, "FORCE": 1,
                                      "ATT": 1, "MUT_FORCE_MALFORMED": 1}, "P2", "mutant",
           "the old rule: reclaim --force removes any malformed lock (--force treats malformed "
           "as dead)", ci=True, control={"MUT_FORCE_MALFORMED": None}),
    Config("mutant-guard-age", {"NA": 1, "NR": 1, "FORCE": 1, "INIT": 1, "MUT_GUARD_AGE": 1},
           "P2", "mutant", "a guard removed by its age alone, its holder stopped", ci=True,
           control={"MUT_GUARD_AGE": None}),
    # Two live holders need a third acquirer besides the paused one and the dead owner: the
    # dead lock is INIT's (a ghost), and the paused holder is `run`, which tries again after
    # its reclamation removed nothing.
    Config("mutant-guard-age-p1", {**MAIN, "FORCE": 1, "INIT": 1, "MAXKILL": 0,
                                   "MUT_GUARD_AGE": 1, "ONLY_P1": 1}, "P1",
           "mutant", "the same, checked for its consequence: two live holders",
           control={"MUT_GUARD_AGE": None}, hash_bits=24),
    Config("mutant-no-reread-p1", {"NA": 2, "NR": 0, "INIT": 1, "MUT_NO_REREAD": 1,
                                   "ONLY_P1": 1}, "P1", "mutant",
           "the same, checked for its consequence: `run` renames Apnea's live lock away and "
           "publishes its own: two live holders", ci=True, control={"MUT_NO_REREAD": None}),
    Config("mutant-keep-pidless", {"NA": 1, "NR": 0, "MAXKILL": 1, "MUT_KEEP_PIDLESS": 1}, "P4",
           "mutant", "reclaim --force never removes pid-less debris: a crashed writer's "
           "candidate stays for ever", ci=True, control={"MUT_KEEP_PIDLESS": None}),
    Config("mutant-keep-guard", {"NA": 1, "NR": 0, "INIT": 2, "MAXKILL": 0, "MUT_KEEP_GUARD": 1},
           "P5", "mutant", "reclaim --force never removes a leftover guard", ci=True,
           control={"MUT_KEEP_GUARD": None}),
    Config("mutant-release-notoken", {"NA": 2, "NR": 0, "DISPLACE": 1, "MUT_RELEASE_NOTOKEN": 1},
           "P3", "mutant", "release without the token checks deletes the next owner's lock "
           "(after a lock was removed by hand)", ci=True, control={"MUT_RELEASE_NOTOKEN": None}),
    Config("mutant-apnea-noguard", {"NA": 2, "NR": 0, "INIT": 1, "MUT_APNEA_NOGUARD": 1}, "P2",
           "mutant", "Apnea's stale reclamation without <lock>.reclaim", ci=True,
           control={"MUT_APNEA_NOGUARD": None}),
    Config("mutant-no-reread", {"NA": 2, "NR": 0, "INIT": 1, "MUT_NO_REREAD": 1}, "P2",
           "mutant", "Apnea's/run's reclamation skips the re-read of the owner under the guard",
           ci=True, control={"MUT_NO_REREAD": None}),
    Config("mutant-guard-rm-race", {**TWO_RECLAIMS_SMALL, "MUT_GUARD_RM_RACE": 1}, "P2",
           "mutant", "apnea-locks before issue 17: two reclaims remove one guard unserialised",
           ci=True, control={"MUT_GUARD_RM_RACE": None}),
    Config("mutant-no-redecide", {**TWO_RECLAIMS_SMALL, "MUT_NO_REDECIDE": 1}, "P2", "mutant",
           "reclaim drops the re-decision under the guard (the guard's inode number reused)",
           ci=True, control={"MUT_NO_REDECIDE": None}),
    Config("mutant-young-debris", {"NA": 2, "NR": 1, "ATT": 1, "FORCE": 1, "MAXKILL": 1,
                                   "PAUSE": 1, "MUT_YOUNG_DEBRIS": 1}, "P2", "mutant",
           "reclaim --force removes pid-less debris younger than --guard-age", ci=True,
           control={"MUT_YOUNG_DEBRIS": None}),
    Config("mutant-plain-evidence", {"NA": 1, "NR": 1, "FORCE": 0, "STEPS": 1,
                                     "MUT_PLAIN_EVIDENCE": 1}, "P2", "mutant",
           "plain reclaim (no --force) acts on clock evidence", ci=True,
           control={"MUT_PLAIN_EVIDENCE": None}),
    Config("mutant-guard-margin", {**GUARD_CLOCK, "MUT_GUARD_MARGIN": 1}, "P2", "mutant",
           "the paused-holder filter without its 60 s margin: after a small forward step the "
           "stopped holder looks younger than its guard, and reclaim --force removes the guard",
           ci=True, control={"MUT_GUARD_MARGIN": None}),
    Config("mutant-rm-r", {"NA": 2, "NR": 0, "MUT_RM_R": 1}, "P6", "mutant",
           "release removes <lock> in place (rm -r) instead of through a tombstone: a reader "
           "sees it without owner.json", ci=True, control={"MUT_RM_R": None}),
    # ---- trust boundaries: what --force trusts (and what a human's rm -r costs), shown
    # failing when the trust fails; their controls keep the trust
    Config("boundary-clock-step", {"NA": 1, "NR": 1, "FORCE": 1, "STEPS": 1}, "P2", "boundary",
           "--force trusts the wall clock: an undetected forward step fakes clock evidence",
           ci=True, control={"STEPS": None}),
    Config("boundary-void-clock", {"NA": 1, "NR": 1, "FORCE": 1, "STEPS": 2, "CLOCK_READINGS": 0},
           "P2", "boundary",
           "the first model's clock (CLOCK_READINGS=0): ages still count after a detected big "
           "step; the code's rule (no age counts while the clock is void) closes it",
           ci=True, control={"STEPS": None, "CLOCK_READINGS": None}),
    Config("boundary-suspend", {"NA": 1, "NR": 1, "FORCE": 1, "STEPS": 4}, "P2", "boundary",
           "a suspend: every age jumps, undetected", ci=True, control={"STEPS": None}),
    Config("boundary-resume", {"NA": 1, "NR": 1, "FORCE": 1, "INIT": 1, "PAUSE": 2}, "P2",
           "boundary", "a guard holder stopped past --guard-age, then resumed", ci=True,
           control={"PAUSE": 1}),
    Config("boundary-guard-clock-back", {**GUARD_CLOCK, "STEPS": 9}, "P2", "boundary",
           "a backward step (up to 60 s) before the guard, a forward step (over 60 s) after it: "
           "the gap since boot stays within 60 s (not void), the stopped holder looks younger "
           "than its guard, and reclaim --force removes the guard", ci=True,
           control={"STEPS": 3}),
    Config("boundary-run-killed", {"NA": 2, "NR": 0, "INIT": 1, "RUN_SPLIT": 1}, "P1", "boundary",
           "run and its command as two processes: SIGKILL of run; before the shim has killed the "
           "command's session, run's pid is dead and its lock is reclaimed and taken", ci=True,
           control={"RUN_SPLIT": None}),
    Config("boundary-ownerless", {"NA": 1, "NR": 1, "FORCE": 1, "PAUSE_WRITE": 1,
                                  "CHECK_OWNERLESS": 1}, "P2", "boundary",
           "a writer stopped between mkdir and owner.json: its pid-less candidate", ci=True,
           control={"CHECK_OWNERLESS": None}),
    # ---- liveness under weak fairness (pan -a -f -N L<n>): acquirer 0 (`run`) keeps trying,
    # sleeping between tries; Apnea 0.2.2 may crash anywhere; a reclaim runs periodically
    Config("live-dead-lock", {**LIVE_BASE}, "pass", "liveness",
           "L1: a dead owner's lock is eventually removed", ltl="L1", hash_bits=24),
    Config("live-acquire", {**LIVE_BASE}, "pass", "liveness",
           "L2: an Apnea that keeps trying eventually acquires once the live holders stop",
           ltl="L2", hash_bits=24),
    Config("live-plain-guard", {**LIVE_BASE, "FORCE": 0}, "L1", "boundary",
           "a periodic plain reclaim never removes a crashed reclamation's guard: the dead "
           "lock under it stays until reclaim --force", ltl="L1", hash_bits=24,
           control={"FORCE": 1}),
    Config("live-keep-guard", {**LIVE_BASE, "MUT_KEEP_GUARD": 1}, "L2", "mutant",
           "reclaim --force never removes a leftover guard: the Apnea that keeps trying never "
           "acquires", ltl="L2", hash_bits=24, control={"MUT_KEEP_GUARD": None}),
    Config("boundary-release-rename", {"NA": 2, "NR": 0, "DISPLACE": 1, "CHECK_RENAME": 1},
           "P3R", "boundary", "after a human's rm -r of the lock, Apnea's token-checked release "
           "may rename the next owner's lock (and keeps it as a tombstone)", ci=True,
           control={"CHECK_RENAME": None}),
]


def say(text):
    print(text, flush=True)


def tools():
    """(spin, cc) or None with the reason."""
    spin = shutil.which("spin")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if spin is None:
        return None, "spin is not installed (Debian: apt install spin; scripts/dev deps installs it)"
    if cc is None:
        return None, "no C compiler (cc) to build Spin's verifier"
    return (spin, cc), ""


def define_args(defines):
    return [f"-D{k}={v}" for k, v in defines.items()]


def run(cmd, cwd, log=None, timeout=None):
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    if log:
        Path(cwd, log).write_text(proc.stdout)
    return proc, time.monotonic() - started


def nice(cmd):
    return ["nice", "-n", "10", *cmd] if shutil.which("nice") else cmd


def build(cfg, workdir, toolset, memlim, model, optimise=True, reach=False):
    spin, cc = toolset
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(model, workdir / "lock.pml")
    proc, _ = run([spin, "-a", *define_args(cfg.defines), "lock.pml"], workdir, "spin.log")
    if proc.returncode != 0:
        raise RuntimeError(f"{cfg.name}: spin -a failed:\n{proc.stdout}")
    flags = ["-O2" if optimise else "-O0", f"-DMEMLIM={memlim}", "-w"]
    if cfg.ltl:
        # Partial-order reduction off (the conservative choice with a never claim over many
        # globals); -DNFAIR: weak fairness over this many processes.
        flags += ["-DNOREDUCE", "-DNFAIR=4"]
    else:
        flags += ["-DSAFETY"]
    flags += ["-DBITSTATE"] if cfg.bitstate else ["-DCOLLAPSE"]
    if reach:
        flags.append("-DREACH")
    proc, _ = run(nice([cc, *flags, "-o", "pan", "pan.c"]), workdir, "cc.log")
    if proc.returncode != 0:
        raise RuntimeError(f"{cfg.name}: compiling pan.c failed:\n{proc.stdout[-3000:]}")


def parse(output):
    def grab(pattern, cast=float, default=None):
        m = re.search(pattern, output)
        return cast(m.group(1)) if m else default
    fired = None
    m = re.search(r"assertion violated\s+!\(p(\d)(r?)_violated\)", output)
    if m:
        fired = f"P{m.group(1)}{m.group(2).upper()}"
    elif "acceptance cycle" in output:
        fired = "cycle"
    elif "invalid end state" in output:
        fired = "end-state"
    elif re.search(r"assertion violated", output):
        fired = "assertion"
    return {
        "errors": grab(r"errors: (\d+)", int),
        "states": grab(r"(\d+) states, stored", int),
        "depth": grab(r"depth reached (\d+)", int),
        "memory": grab(r"([\d.]+)\s+total actual memory usage"),
        "seconds": grab(r"pan: elapsed time ([\d.e+]+) seconds"),
        "hash_factor": grab(r"hash factor: ([\d.e+]+)"),
        "fired": fired,
        "depth_cut": "max search depth too small" in output,
        "memory_cut": ("reached -DMEMLIM bound" in output or "out of memory" in output
                       or "pan: out of memory" in output),
    }


def verify(cfg, workdir):
    extra = []
    if cfg.ltl:
        extra = ["-a", "-f", "-N", cfg.ltl]
    if cfg.bitstate:
        extra += ["-k3"]
    depth = next((a for a in cfg.pan_args if a.startswith("-m")), "-m100000")
    rest = [a for a in cfg.pan_args if not a.startswith("-m")]
    proc, wall = run(nice(["./pan", depth, f"-w{cfg.hash_bits}", "-n", *extra, *rest]), workdir, "pan.log")
    stats = parse(proc.stdout)
    stats["wall"] = wall
    stats["output"] = proc.stdout
    return stats


def replay(cfg, workdir, trail):
    """The violation a fresh trail shows in spin's replay: (property, the replay's narrative)."""
    spin, _ = tools()[0]
    # (spin -t replays the claim the trail was made with: its -N is a claim file, not a name)
    proc, _ = run([spin, "-t", "-k", str(trail), *define_args(cfg.defines), "lock.pml"], workdir)
    lines = [l.strip() for l in proc.stdout.splitlines()
             if re.match(r"\s*(\[(pid|clock|killer|pauser|human|init)|MODEL |<<<<<START OF CYCLE)", l)]
    found = next((l for l in lines if l.startswith("MODEL ")), "")
    m = re.match(r"MODEL (P\dR?|L\d)", found)
    return (m.group(1) if m else None), lines


def bitstate_coverage(cfg, stats, k=3):
    """An estimate of a bitstate search's coverage, not a bound: with n states in m = 2^w bits
    and k bits per state, a new state is wrongly taken for a visited one with probability at
    most (1 - e^(-kn/m))^k (its chance when the table is at its fullest, at the end); a state
    so lost may take successors with it that no other path reaches. pan's "hash factor" m/n
    says the same more coarsely (best above 100)."""
    n, m = stats["states"] or 0, 2 ** cfg.hash_bits
    return 1 - (1 - math.exp(-k * n / m)) ** k


def judge(cfg, stats, workdir):
    """The verdict on one search, and whether it is a failure."""
    if stats["errors"] is None or stats["states"] is None or stats["depth"] is None:
        return "NO STATISTICS (pan output incomplete)", True
    if stats["depth_cut"]:
        return "DEPTH CUT (max search depth too small)", True
    if stats["memory_cut"]:
        return "MEMORY CUT (search incomplete)", True
    if cfg.expect == "pass":
        if stats["errors"] != 0:
            return f"VIOLATED ({stats['fired']})", True
        if cfg.bitstate:
            return f"holds (bitstate, coverage ~{bitstate_coverage(cfg, stats):.4%})", False
        return "holds", False
    if stats["errors"] < 1:
        return f"NO {cfg.expect} (no violation found)", True
    fired = stats["fired"]
    if cfg.ltl:
        fired = cfg.expect if fired == "cycle" else fired
    if fired != cfg.expect:
        return f"NO {cfg.expect} (pan reports {fired})", True
    trail = workdir / "lock.pml.trail"
    if not trail.exists():
        return f"NO {cfg.expect} (pan wrote no trail)", True
    shown, _ = replay(cfg, workdir, trail)
    if shown != cfg.expect:
        return f"NO {cfg.expect} (its trail replays as {shown})", True
    return f"counterexample {cfg.expect}", False


def row(cfg, stats, verdict):
    mem = f"{stats['memory']:.0f}" if stats.get("memory") else "-"
    return (f"{cfg.name:36} {cfg.expect:5} {verdict:34} {stats.get('states') or '-':>11} "
            f"{stats.get('depth') or '-':>6} {mem:>7} {stats.get('wall', 0):>7.1f}")


def header():
    return (f"{'configuration':36} {'expect':5} {'result':34} {'states':>11} {'depth':>6} "
            f"{'MB':>7} {'seconds':>7}")


def selection(chosen, full):
    """The searches to run: each chosen configuration, and after each mutant or boundary
    its control (once per distinct set of switches)."""
    runs, seen = [], set()
    for cfg in chosen:
        if not full and not cfg.ci:
            continue
        for c in [cfg] + ([control_of(cfg)] if cfg.control is not None else []):
            key = (c.expect, tuple(sorted(c.defines.items())), c.ltl, c.bitstate)
            if key in seen:
                continue
            seen.add(key)
            runs.append(c)
    return runs


def check(runs, base, toolset, memlim, model, quiet=False, full=False):
    """Runs every search; returns {name: (failed, verdict)}."""
    results = {}
    if not quiet:
        say(header())
    for cfg in runs:
        workdir = base / cfg.name.replace("/", "-")
        # -O2 pays for itself on the big searches only.
        build(cfg, workdir, toolset, memlim, model, optimise=full and not cfg.ci)
        stats = verify(cfg, workdir)
        verdict, failed = judge(cfg, stats, workdir)
        results[cfg.name] = (failed, verdict)
        if not quiet:
            say(row(cfg, stats, verdict))
            if failed and cfg.expect == "pass" and stats["errors"]:
                _, lines = replay(cfg, workdir, workdir / "lock.pml.trail")
                say("\n".join(lines[-40:]))
    return results


# ---------------------------------------------------------------- the check of the check
def neutralise_asserts(text):
    """Every assertion of the model replaced by skip."""
    out, n = re.subn(r"assert\s*\([^;{}]*?\)(?=\s*(\n|;|\}|$))", "skip", text)
    return out, n


def make_vacuous(text, prop):
    """Property prop's violation conditions (#define P<n>_BAD..., P2_GUARD_BAD, ...) made false."""
    out, n = re.subn(rf"^(#define {prop}(_GUARD)?_BAD(\([^)]*\))?)\s.*$", r"\1 (false)", text,
                     flags=re.M)
    return out, n


def meta(base, toolset, memlim, only):
    """Each neutralised copy of the model must make the check fail: every search that relies on
    the neutralised assertions must now fail. Returns the failures of the check of the check."""
    text = MODEL.read_text()
    counterexamples = [c for c in CONFIGS if c.ci and c.expect != "pass"
                       and (not only or c.name in only)]
    cases = [("every assertion neutralised (assert -> skip)", neutralise_asserts(text), counterexamples)]
    for prop in PROPERTIES:
        relying = [c for c in counterexamples if c.expect == prop]
        if relying:
            cases.append((f"{prop} made vacuous", make_vacuous(text, prop), relying))
    problems = []
    say(f"{'neutralisation':48} {'searches':>8} {'failed':>6}  verdict")
    # A search cut short must fail the check, never pass it: a holding configuration searched
    # with too small a depth bound, and with too little memory.
    control = next(c for c in CONFIGS if c.name == "ci-force")
    for what, cut, limit in [("a search cut by its depth bound (-m200)", replace(control, pan_args=("-m200",)), memlim),
                             ("a search cut by memory (-DMEMLIM=40)", control, 40)]:
        results = check([cut], base / re.sub(r"[^a-z0-9]+", "-", what), toolset, limit, MODEL, quiet=True)
        failed, verdict = results[cut.name]
        say(f"{what:48} {1:>8} {int(failed):>6}  "
            + (f"the check fails, as it must: {verdict}" if failed else "STILL PASSING"))
        if not failed:
            problems.append(f"{what}: still passes")
    for what, (mutated, edits), relying in cases:
        if edits == 0:
            problems.append(f"{what}: nothing to neutralise in lock.pml (the check of the check is stale)")
            say(f"{what:48} {'-':>8} {'-':>6}  NOTHING NEUTRALISED")
            continue
        copy = base / f"meta-{len(problems)}-{re.sub(r'[^a-z0-9]+', '-', what.lower())}.pml"
        copy.write_text(mutated)
        results = check(relying, base / copy.stem, toolset, memlim, copy, quiet=True)
        still = [name for name, (failed, _) in results.items() if not failed]
        verdict = "the check fails, as it must" if not still else f"STILL PASSING: {', '.join(still)}"
        say(f"{what + f' ({edits} edits)':48} {len(results):>8} {len(results) - len(still):>6}  {verdict}")
        if still:
            problems.append(f"{what}: {', '.join(still)} still pass")
    return problems


# ---------------------------------------------------------------- recording trails
def record(cfg, workdir, toolset, memlim):
    """Searches a short counterexample; writes trails/NAME.trail and NAME.txt."""
    out = ""
    if cfg.ltl:  # pan's -i shortens safety counterexamples only: the first cycle will do
        build(cfg, workdir, toolset, memlim, MODEL)
        out = verify(cfg, workdir)["output"]
    else:
        build(cfg, workdir, toolset, memlim, MODEL, reach=True)
        try:
            proc = subprocess.run(nice(["./pan", "-m100000", f"-w{cfg.hash_bits}", "-n", "-i"]),
                                  cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=cfg.shorten_seconds)
            out = proc.stdout
        except subprocess.TimeoutExpired as expired:
            out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
    trail = workdir / "lock.pml.trail"
    if not trail.exists():  # no time left to shorten: the first counterexample will do
        build(cfg, workdir, toolset, memlim, MODEL)
        verify(cfg, workdir)
    if not trail.exists():
        raise RuntimeError(f"{cfg.name}: no counterexample found\n{out[-2000:]}")
    TRAILS.mkdir(exist_ok=True)
    shutil.copy(trail, TRAILS / f"{cfg.name}.trail")
    prop, lines = replay(cfg, workdir, TRAILS / f"{cfg.name}.trail")
    steps = sum(1 for _ in trail.read_text().splitlines())
    header_lines = [
        f"# {cfg.name}: {cfg.what}",
        f"# expected: a violation of {cfg.expect}; replayed: {prop}",
        f"# spin -t -k docs/model/trails/{cfg.name}.trail {' '.join(define_args(cfg.defines))} docs/model/lock.pml",
        f"# {steps} steps; what each process printed, in order:",
        "",
    ]
    (TRAILS / f"{cfg.name}.txt").write_text("\n".join(header_lines + lines) + "\n")
    return prop, steps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--ci", action="store_true")
    mode.add_argument("--meta", action="store_true")
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--record", action="store_true")
    mode.add_argument("--list", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", default="")
    ap.add_argument("--memlim", type=int, default=7000)
    ap.add_argument("--model", default=str(MODEL))
    args = ap.parse_args()

    only = [n for n in args.only.split(",") if n]
    chosen = [c for c in CONFIGS if not only or c.name in only]
    if only and len(chosen) != len(only):
        known = ", ".join(c.name for c in CONFIGS)
        sys.exit(f"check.py: unknown configuration in --only {args.only} (known: {known})")
    if args.list:
        for c in chosen:
            tier = "ci" if c.ci else "full"
            say(f"{c.name:32} {c.kind:9} {tier:4} expect {c.expect:5} {' '.join(define_args(c.defines))}"
                + (f" -N {c.ltl}" if c.ltl else "") + (" (bitstate)" if c.bitstate else "")
                + f"\n{'':32} {c.what}")
            if c.control is not None:
                ctl = control_of(c)
                say(f"{'':32} control, must hold: {' '.join(define_args(ctl.defines))}")
        return 0

    toolset, why = tools()
    if toolset is None:
        say(f"MODEL CHECK SKIPPED: {why}")
        return SKIP

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="apnea-model-"))
    base.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    failures = []
    try:
        if args.record:
            for cfg in [c for c in chosen if c.expect != "pass"]:
                prop, steps = record(cfg, base / cfg.name, toolset, args.memlim)
                ok = prop == cfg.expect
                say(f"{cfg.name:32} recorded: {steps} steps, shows {prop} "
                    f"({'as expected' if ok else 'EXPECTED ' + cfg.expect})")
                if not ok:
                    failures.append(cfg.name)
        elif args.meta:
            failures = meta(base, toolset, args.memlim, only)
        else:
            runs = selection(chosen, args.full)
            results = check(runs, base, toolset, args.memlim, Path(args.model), full=args.full)
            failures = [name for name, (failed, _) in results.items() if failed]
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    took = time.monotonic() - started
    if failures:
        say(f"MODEL CHECK FAILED ({took:.0f} s): " + "; ".join(failures))
        return 1
    if args.meta:
        say(f"model check of the check ({took:.0f} s): every neutralisation makes the check fail")
    elif args.record:
        say(f"trails recorded ({took:.0f} s): each shows the property its configuration names")
    else:
        say(f"model check ({took:.0f} s): every property holds; every mutant and trust boundary "
            "shows its counterexample, and every control holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
