#!/usr/bin/env python3
"""Model-checks docs/model/lock.pml with Spin (see docs/model/README.md).

  check.py --ci        the small configurations (exhaustive, seconds) and a replay of every
                       recorded counterexample (docs/model/trails/), which must still show
                       its violation: the meson test `model`
  check.py --full      every configuration of the README exhaustively, and a fresh search of
                       every mutant and trust boundary: `scripts/dev model` (minutes, GBs)
  check.py --record    searches every mutant and trust boundary again for a short
                       counterexample and rewrites docs/model/trails/ (after a model change)
  check.py --list      the configurations and their -D switches

Options: --only NAME[,NAME...] runs those configurations alone; --keep DIR keeps the build
directories in DIR; --memlim MB caps each verifier's memory (default 3500).

Each verifier is built by `spin -a -DNAME=VALUE... lock.pml`, compiled with
`cc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=MB pan.c` and run as `pan -m100000 -wN -n`, niced.
Without spin or a C compiler the check is skipped (exit 77, meson's SKIP) with a message.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "lock.pml"
TRAILS = HERE / "trails"
SKIP = 77


@dataclass
class Config:
    name: str
    defines: dict
    expect: str          # "pass", or the property whose violation it must show ("P2", ...)
    kind: str            # "property", "mutant", "boundary"
    what: str
    ci: bool = False     # a property configuration small enough for CI
    hash_bits: int = 26
    shorten_seconds: int = 60   # --record: time to look for a shorter counterexample
    extra: dict = field(default_factory=dict)


MAIN = {"NA": 2, "NR": 1}
CONFIGS = [
    # ---- properties: every one must hold
    Config("plain", {**MAIN, "FORCE": 0, "PAUSE": 2, "STEPS": 7}, "pass", "property",
           "Apnea 0.2.2 + run + reclaim; crashes, pauses resumed at any time, every clock step"),
    Config("force", {**MAIN, "FORCE": 1, "PAUSE": 1, "PAUSE_WRITE": 1}, "pass", "property",
           "Apnea 0.2.2 + run + reclaim --force, within --force's trusts"),
    Config("force-other-writer", {"NA": 2, "FLAV1": "FOREIGN", "NR": 1, "FORCE": 1, "PAUSE": 1,
                                  "PAUSE_WRITE": 1}, "pass", "property",
           "Apnea 0.2.2 + a writer of malformed records + reclaim --force"),
    Config("two-reclaims", {"NA": 2, "FLAV0": "RUN", "FLAV1": "REF", "NR": 2, "RSTEPS2": 1,
                            "FORCE": 1, "INIT": 2, "TICKS": 0, "ATT": 1, "MAXKILL": 0,
                            "PAUSE": 0}, "pass", "property",
           "a dead lock and a leftover guard; run + Apnea 0.2.2 + two reclaim --force"),
    Config("ci-force", {"NA": 1, "NR": 1, "FORCE": 1, "INIT": 2, "PAUSE": 1, "PAUSE_WRITE": 1},
           "pass", "property", "CI: a dead lock and a leftover guard; Apnea + reclaim --force",
           ci=True, hash_bits=20),
    Config("ci-mixed", {"NA": 2, "NR": 1, "ATT": 1, "FORCE": 1, "MAXKILL": 1, "PAUSE": 1},
           "pass", "property", "CI: Apnea 0.2.2 + run (one attempt) + reclaim --force, one crash",
           ci=True, hash_bits=22),
    # ---- mutants of the protocol: each must produce a counterexample
    Config("mutant-force-malformed", {"NA": 2, "FLAV1": "FOREIGN", "NR": 1, "FORCE": 1,
                                      "MUT_FORCE_MALFORMED": 1}, "P2", "mutant",
           "the old rule: reclaim --force removes any malformed lock"),
    Config("mutant-guard-age", {**MAIN, "FORCE": 1, "MUT_GUARD_AGE": 1}, "P2", "mutant",
           "a guard removed by its age alone, its holder stopped"),
    # Two live holders need a third acquirer besides the paused one and the dead owner: the
    # dead lock is INIT's (a ghost), and the paused holder is `run`, which tries again after
    # its reclamation removed nothing.
    Config("mutant-guard-age-p1", {**MAIN, "FORCE": 1, "INIT": 1, "MAXKILL": 0,
                                   "MUT_GUARD_AGE": 1, "ONLY_P1": 1}, "P1",
           "mutant", "the same, checked for its consequence: two live holders"),
    Config("mutant-release-notoken", {"NA": 2, "NR": 0, "DISPLACE": 1, "MUT_RELEASE_NOTOKEN": 1},
           "P3", "mutant", "release without the token checks, after a lock was removed by hand"),
    Config("mutant-apnea-noguard", {"NA": 2, "NR": 0, "INIT": 1, "MUT_APNEA_NOGUARD": 1}, "P2",
           "mutant", "Apnea's stale reclamation without <lock>.reclaim"),
    Config("mutant-guard-rm-race", {"NA": 2, "FLAV0": "RUN", "FLAV1": "REF", "NR": 2,
                                    "RSTEPS2": 1, "FORCE": 1, "INIT": 2, "TICKS": 0, "ATT": 1,
                                    "MAXKILL": 0, "PAUSE": 0, "MUT_GUARD_RM_RACE": 1}, "P2",
           "mutant", "apnea-locks before issue 17: two reclaims remove one guard unserialised"),
    # ---- trust boundaries: what --force trusts, shown failing when the trust fails
    Config("boundary-clock-step", {**MAIN, "FORCE": 1, "STEPS": 1}, "P2", "boundary",
           "--force trusts the wall clock: an undetected forward step fakes clock evidence"),
    Config("boundary-void-clock", {**MAIN, "FORCE": 1, "STEPS": 2}, "P2", "boundary",
           "a detected (void) big step: ages of guards and pid-less entries are still trusted"),
    Config("boundary-suspend", {**MAIN, "FORCE": 1, "STEPS": 4}, "P2", "boundary",
           "a suspend: every age jumps, undetected"),
    Config("boundary-resume", {**MAIN, "FORCE": 1, "PAUSE": 2}, "P2", "boundary",
           "a guard holder stopped past --guard-age, then resumed"),
    Config("boundary-ownerless", {**MAIN, "FORCE": 1, "PAUSE_WRITE": 1, "CHECK_OWNERLESS": 1},
           "P2", "boundary", "a writer stopped between mkdir and owner.json: its pid-less candidate"),
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


def build(cfg, workdir, toolset, memlim, optimise=True, reach=False):
    spin, cc = toolset
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(MODEL, workdir / "lock.pml")
    proc, _ = run([spin, "-a", *define_args(cfg.defines), "lock.pml"], workdir, "spin.log")
    if proc.returncode != 0:
        raise RuntimeError(f"{cfg.name}: spin -a failed:\n{proc.stdout}")
    flags = ["-O2" if optimise else "-O0", "-DSAFETY", "-DCOLLAPSE", f"-DMEMLIM={memlim}", "-w"]
    if reach:
        flags.append("-DREACH")
    proc, _ = run(nice([cc, *flags, "-o", "pan", "pan.c"]), workdir, "cc.log")
    if proc.returncode != 0:
        raise RuntimeError(f"{cfg.name}: compiling pan.c failed:\n{proc.stdout[-3000:]}")


def parse(output):
    def grab(pattern, cast=float, default=None):
        m = re.search(pattern, output)
        return cast(m.group(1)) if m else default
    return {
        "errors": grab(r"errors: (\d+)", int, -1),
        "states": grab(r"(\d+) states, stored", int),
        "depth": grab(r"depth reached (\d+)", int),
        "memory": grab(r"([\d.]+)\s+total actual memory usage"),
        "seconds": grab(r"pan: elapsed time ([\d.e+]+) seconds"),
        "memlim": "reached -DMEMLIM bound" in output or "out of memory" in output,
    }


def verify(cfg, workdir, extra=()):
    proc, wall = run(nice(["./pan", "-m100000", f"-w{cfg.hash_bits}", "-n", *extra]), workdir, "pan.log")
    stats = parse(proc.stdout)
    stats["wall"] = wall
    return stats


def replay(cfg, workdir, trail):
    """The violation a trail shows: (property, the replay's narrative)."""
    spin, _ = tools()[0]
    shutil.copy(MODEL, workdir / "lock.pml")
    proc, _ = run([spin, "-t", "-k", str(trail), *define_args(cfg.defines), "lock.pml"], workdir)
    lines = [l.strip() for l in proc.stdout.splitlines()
             if re.match(r"\s*(\[(pid|clock|killer|pauser|human|init)|MODEL )", l)]
    found = next((l for l in lines if l.startswith("MODEL ")), "")
    m = re.match(r"MODEL (P\d)", found)
    return (m.group(1) if m else None), lines


def record(cfg, workdir, toolset, memlim):
    """Searches a short counterexample; writes trails/NAME.trail and NAME.txt."""
    build(cfg, workdir, toolset, memlim, reach=True)
    extra = ["-i"]
    try:
        proc = subprocess.run(nice(["./pan", "-m100000", f"-w{cfg.hash_bits}", "-n", *extra]),
                              cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=cfg.shorten_seconds)
        out = proc.stdout
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
    trail = workdir / "lock.pml.trail"
    if not trail.exists():  # no time left to shorten: the first counterexample will do
        build(cfg, workdir, toolset, memlim)
        verify(cfg, workdir)
    if not trail.exists():
        raise RuntimeError(f"{cfg.name}: no counterexample found\n{out[-2000:]}")
    TRAILS.mkdir(exist_ok=True)
    shutil.copy(trail, TRAILS / f"{cfg.name}.trail")
    prop, lines = replay(cfg, workdir, TRAILS / f"{cfg.name}.trail")
    steps = sum(1 for _ in trail.read_text().splitlines())
    header = [
        f"# {cfg.name}: {cfg.what}",
        f"# expected: a violation of {cfg.expect}; replayed: {prop}",
        f"# spin -t -k docs/model/trails/{cfg.name}.trail {' '.join(define_args(cfg.defines))} docs/model/lock.pml",
        f"# {steps} steps; what each process printed, in order:",
        "",
    ]
    (TRAILS / f"{cfg.name}.txt").write_text("\n".join(header + lines) + "\n")
    return prop, steps


def row(cfg, stats, verdict):
    mem = f"{stats['memory']:.0f}" if stats.get("memory") else "-"
    return (f"{cfg.name:26} {cfg.expect:5} {verdict:22} {stats.get('states') or '-':>11} "
            f"{stats.get('depth') or '-':>6} {mem:>7} {stats.get('wall', 0):>7.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--ci", action="store_true")
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--record", action="store_true")
    mode.add_argument("--list", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--keep", default="")
    ap.add_argument("--memlim", type=int, default=3500)
    args = ap.parse_args()

    chosen = [c for c in CONFIGS if not args.only or c.name in args.only.split(",")]
    if args.only and len(chosen) != len(args.only.split(",")):
        known = ", ".join(c.name for c in CONFIGS)
        sys.exit(f"check.py: unknown configuration in --only {args.only} (known: {known})")
    if args.list:
        for c in chosen:
            say(f"{c.name:26} {c.kind:9} expect {c.expect:5} {' '.join(define_args(c.defines))}\n"
                f"{'':26} {c.what}")
        return 0

    toolset, why = tools()
    if toolset is None:
        say(f"MODEL CHECK SKIPPED: {why}")
        return SKIP

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="apnea-model-"))
    failures = []
    try:
        if args.record:
            for cfg in [c for c in chosen if c.expect != "pass"]:
                prop, steps = record(cfg, base / cfg.name, toolset, args.memlim)
                ok = prop == cfg.expect
                say(f"{cfg.name:26} recorded: {steps} steps, shows {prop} "
                    f"({'as expected' if ok else 'EXPECTED ' + cfg.expect})")
                if not ok:
                    failures.append(cfg.name)
        else:
            say(f"{'configuration':26} {'expect':5} {'result':22} {'states':>11} {'depth':>6} "
                f"{'MB':>7} {'seconds':>7}")
            for cfg in chosen:
                if args.ci and not cfg.ci and cfg.expect == "pass":
                    continue
                workdir = base / cfg.name
                if args.ci and cfg.expect != "pass":
                    # CI replays the recorded counterexample instead of searching again.
                    trail = TRAILS / f"{cfg.name}.trail"
                    workdir.mkdir(parents=True, exist_ok=True)
                    if not trail.exists():
                        say(f"{cfg.name:26} {cfg.expect:5} NO RECORDED TRAIL (check.py --record)")
                        failures.append(cfg.name)
                        continue
                    started = time.monotonic()
                    prop, _ = replay(cfg, workdir, trail)
                    verdict = f"replay shows {prop}" if prop == cfg.expect else f"REPLAY SHOWS {prop}"
                    say(row(cfg, {"wall": time.monotonic() - started}, verdict))
                    if prop != cfg.expect:
                        failures.append(cfg.name)
                    continue
                # -O2 pays for itself on the big searches only; a counterexample comes fast.
                build(cfg, workdir, toolset, args.memlim, optimise=not args.ci and cfg.expect == "pass")
                stats = verify(cfg, workdir)
                if stats["memlim"]:
                    verdict = "INCOMPLETE (memory)"
                    failures.append(cfg.name)
                elif cfg.expect == "pass":
                    verdict = "holds" if stats["errors"] == 0 else "VIOLATED"
                    if stats["errors"] != 0:
                        failures.append(cfg.name)
                        prop, lines = replay(cfg, workdir, workdir / "lock.pml.trail")
                        say("\n".join(lines[-40:]))
                else:
                    prop = None
                    if stats["errors"] > 0:
                        prop, _ = replay(cfg, workdir, workdir / "lock.pml.trail")
                    verdict = f"counterexample {prop}" if prop == cfg.expect else f"NO {cfg.expect} ({prop})"
                    if prop != cfg.expect:
                        failures.append(cfg.name)
                say(row(cfg, stats, verdict))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if failures:
        say(f"MODEL CHECK FAILED: {', '.join(failures)}")
        return 1
    say("model check: every property holds; every mutant and trust boundary shows its counterexample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
