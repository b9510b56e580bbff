#!/usr/bin/env python3
"""apnea-locks benchmarks against the reference (apnea-peer) and the machine's floor.

Run by `scripts/dev bench [--quick]`, which builds build-bench/ first. Measures, in one run
and on the same lock areas, so that the ratios hold even on a noisy machine:

  1. inspection: `apnea-locks status --json` against `apnea-peer classify-all` on generated
     areas of 0, 1k, 10k and 100k entries: whole-process wall time (hyperfine, median) and
     peak RSS (/usr/bin/time -v);
  2. system calls per entry: `strace -f -c` of status at 10k entries;
  3. acquire/release cycles of one repository lock: the core (lock_stress cycles), the
     reference (apnea-peer cycles) and the floor (tests/bench/floor.cc), interleaved;
  4. contention: 4 processes on one lock (lock_stress stress / apnea-peer stress):
     throughput, fairness, lost updates.

Prints a table and the targets of issue 7 with PASS/MISS; --json FILE also writes the raw
figures. Everything happens in a fresh folder under --tmp (default /tmp), removed at the end.

Usage: bench.py --build DIR --reference APNEA_PEER [--quick] [--json FILE] [--tmp DIR]
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ENTRY_SIZES = [0, 1_000, 10_000, 100_000]
QUICK_SIZES = [0, 1_000, 10_000]
SYSCALL_SIZE = 10_000
FLEET_AREAS, FLEET_ENTRIES = 100, 100  # the fleet-sized case: 100 areas of 100 entries
# System calls per entry of `status --json` at 10k entries when issue 7 landed (6.36): the
# survey may not make more.
SYSCALLS_PER_ENTRY_LANDED = 6.36


def log(message):
    print(f"bench: {message}", file=sys.stderr, flush=True)


def run(args, env=None, check=True, stdout=subprocess.PIPE, timeout=None):
    result = subprocess.run(args, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def settle():
    """Writes the new areas out before anything is timed: otherwise the kernel's writeback of
    some 200k new inodes runs during the first measurements, on the same two CPUs."""
    begun = time.monotonic()
    os.sync()
    log(f"areas written out (sync: {time.monotonic() - begun:.1f} s)")


def last_json(text):
    """The last JSON object line of a tool's output."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in output: {text[-300:]!r}")


class Bench:
    def __init__(self, options):
        self.o = options
        self.build = os.path.abspath(options.build)
        self.core = os.path.join(self.build, "apnea-locks")
        self.stress = os.path.join(self.build, "tests", "lock_stress")
        self.make_area = os.path.join(self.build, "tests", "bench_make_area")
        self.floor = os.path.join(self.build, "tests", "bench_floor")
        self.reference = os.path.abspath(options.reference) if options.reference else None
        self.work = tempfile.mkdtemp(prefix="apnea-bench.", dir=options.tmp)
        os.chmod(self.work, 0o700)
        self.root = os.path.join(self.work, "repo")  # the repository whose lock is cycled
        os.mkdir(self.root)
        self.ref_tmp = os.path.join(self.work, "reftmp")  # TMPDIR for the reference
        os.mkdir(self.ref_tmp, 0o700)
        self.results = {}
        self.live = None

    def ref_env(self):
        env = dict(os.environ)
        env["TMPDIR"] = self.ref_tmp
        return env

    def close(self):
        if self.live is not None:
            self.live.kill()
            self.live.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    # 1. Inspection -------------------------------------------------------------------

    def make_areas(self, sizes):
        # A sleeping child is the live owner: its pid is probed like any other process. It
        # runs as `node` (a copy of sleep), as an Apnea does: a plain `sleep` runs no
        # recognised runtime, so its locks would be pid-not-runtime (stale), not live.
        node = os.path.join(self.work, "node")
        shutil.copy(shutil.which("sleep"), node)
        os.chmod(node, 0o755)
        self.live = subprocess.Popen([node, "1000000"])
        areas = {}
        for size in sizes:
            path = os.path.join(self.work, f"area-{size}")
            info = last_json(run([self.make_area, path, str(size), str(self.live.pid)]).stdout)
            areas[size] = path
            self.results.setdefault("areas", {})[str(size)] = info
        settle()
        return areas

    def hyperfine(self, command, runs, warmup, env=None):
        out = os.path.join(self.work, "hyperfine.json")
        run(["hyperfine", "-N", "-i", "--style", "none", "-w", str(warmup), "-r", str(runs),
             "--export-json", out, "--", command], env=env)
        with open(out) as f:
            times = json.load(f)["results"][0]["times"]
        return {"median_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3,
                "runs": len(times)}

    def interleaved(self, commands, runs, warmup, rounds):
        """hyperfine over `commands` in `rounds` short rounds, the commands in turn within
        each: a slow spell of the machine then hits all of them, as in the cycles below. Per
        command: the median and fastest of all its runs, and its median in each round."""
        out = os.path.join(self.work, "hyperfine.json")
        per_round = max(2, -(-runs // rounds))
        times = [[] for _ in commands]
        medians = [[] for _ in commands]
        for r in range(rounds):
            run(["hyperfine", "-N", "-i", "--style", "none", "-w", str(warmup if r == 0 else 1),
                 "-r", str(per_round), "--export-json", out, "--", *commands])
            with open(out) as f:
                results = json.load(f)["results"]
            for i, result in enumerate(results):
                times[i] += result["times"]
                medians[i].append(statistics.median(result["times"]) * 1e3)
        return [{"median_ms": statistics.median(t) * 1e3, "min_ms": min(t) * 1e3, "runs": len(t),
                 "round_medians_ms": m} for t, m in zip(times, medians)]

    def peak_rss_kib(self, args, env=None, repeat=3):
        out = os.path.join(self.work, "time.txt")
        peaks = []
        for _ in range(repeat):
            with open(os.devnull, "w") as null:
                subprocess.run(["/usr/bin/time", "-v", "-o", out] + args, env=env, stdout=null,
                               stderr=subprocess.DEVNULL)
            with open(out) as f:
                match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
            peaks.append(int(match.group(1)))
        return max(peaks)

    def inspection(self, areas):
        quick = self.o.quick
        plan = {0: (100, 10, 5), 1_000: (50, 5, 5), 10_000: (20, 3, 5), 100_000: (5, 1, 2)}
        rows = {}
        for size, path in areas.items():
            runs, warmup, ref_runs = plan[size]
            if quick:
                runs, ref_runs = max(3, runs // 3), max(2, ref_runs // 2)
            status = [self.core, "status", "--json", "--lock-dir", path]
            commands = [" ".join(status), f"{self.floor} scan {path}"]
            if size >= 10_000:  # the same on one thread: what the jobs add
                commands.append(" ".join(status + ["--jobs", "1"]))
            rounds = 3 if quick else 5
            log(f"status --json, bench_floor scan{' and --jobs 1' if size >= 10_000 else ''}, "
                f"{size} entries, {rounds} interleaved rounds")
            timed = self.interleaved(commands, runs, warmup, rounds)
            row = {"core": timed[0], "floor": timed[1]}
            if size >= 10_000:
                row["core_1job"] = timed[2]
            # The ratio of the same round's medians, then the median over the rounds.
            for name in ("core", "core_1job"):
                if name in row:
                    row[f"{name}_over_floor"] = statistics.median(
                        c / f for c, f in zip(row[name]["round_medians_ms"],
                                              row["floor"]["round_medians_ms"]))
            row["core"]["rss_kib"] = self.peak_rss_kib(status)
            with_ref = self.reference and (size < 100_000 or not self.o.no_reference_100k)
            if with_ref:
                log(f"reference classify-all, {size} entries")
                classify = [self.reference, "classify-all", path]
                row["reference"] = self.hyperfine(" ".join(classify), ref_runs,
                                                  1 if size < 100_000 else 0, self.ref_env())
                row["reference"]["rss_kib"] = self.peak_rss_kib(classify, self.ref_env(),
                                                                repeat=1)
            rows[size] = row
        self.results["inspection"] = {str(k): v for k, v in rows.items()}
        return rows

    # 1b. A fleet: many small areas, one process each -------------------------------------

    def fleet(self):
        areas, entries = (20, 100) if self.o.quick else (FLEET_AREAS, FLEET_ENTRIES)
        log(f"fleet: {areas} areas of {entries} entries")
        paths = []
        for i in range(areas):
            path = os.path.join(self.work, f"fleet-{i}")
            run([self.make_area, path, str(entries), str(self.live.pid)])
            paths.append(path)
        settle()

        def sweep(command, chosen, env=None):
            begun = time.perf_counter()
            for path in chosen:
                subprocess.run(command(path), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
            return (time.perf_counter() - begun) * 1e3 / len(chosen)

        rounds = {"core": [], "floor": []}
        for _ in range(3 if self.o.quick else 5):  # interleaved: a slow spell hits both
            rounds["core"].append(sweep(lambda p: [self.core, "status", "--json", "--lock-dir", p], paths))
            rounds["floor"].append(sweep(lambda p: [self.floor, "scan", p], paths))
        result = {"areas": areas, "entries": entries,
                  "core_ms_per_area": statistics.median(rounds["core"]),
                  "floor_ms_per_area": statistics.median(rounds["floor"])}
        result["core_over_floor"] = statistics.median(
            c / f for c, f in zip(rounds["core"], rounds["floor"]))
        if self.reference:  # ~0.6 s of Node start an area: 10 of them tell the rate
            log("fleet: the reference on 10 of the areas")
            result["reference_ms_per_area"] = sweep(
                lambda p: [self.reference, "classify-all", p], paths[:10], self.ref_env())
        self.results["fleet"] = result
        return result

    # 2. System calls -----------------------------------------------------------------

    def strace_counts(self, args, env=None):
        out = os.path.join(self.work, "strace.txt")
        with open(os.devnull, "w") as null:
            subprocess.run(["strace", "-f", "-c", "-o", out] + args, env=env, stdout=null,
                           stderr=subprocess.DEVNULL)
        counts = {}
        with open(out) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 5 and re.match(r"^[0-9.]+$", fields[0]) and fields[-1] != "total":
                    counts[fields[-1]] = int(fields[3])
        return counts

    def syscalls(self, areas):
        size = SYSCALL_SIZE
        log(f"strace -f -c of status at {size} entries")
        status = lambda path: [self.core, "status", "--json", "--lock-dir", path]
        full = self.strace_counts(status(areas[size]))
        empty = self.strace_counts(status(areas[0]))
        info = self.results["areas"][str(size)]
        locks = info["stale"] + info["live"] + info["malformed"]
        result = {
            "entries": size, "lock_entries": locks, "total": sum(full.values()),
            "empty_area_total": sum(empty.values()),
            "per_call": {name: full.get(name, 0) - empty.get(name, 0)
                         for name in sorted(set(full) | set(empty))},
            "distinct_pids": info["distinct_dead_pids"] + 1,
        }
        result["per_entry"] = result["total"] / size
        result["per_entry_marginal"] = (result["total"] - result["empty_area_total"]) / size
        if self.reference and not self.o.quick:
            log(f"strace -f -c of the reference at {size} entries")
            ref = self.strace_counts([self.reference, "classify-all", areas[size]], self.ref_env())
            ref_empty = self.strace_counts([self.reference, "classify-all", areas[0]],
                                           self.ref_env())
            result["reference_per_entry_marginal"] = (
                sum(ref.values()) - sum(ref_empty.values())) / size
        self.results["syscalls"] = result
        return result

    # 3. Cycles -----------------------------------------------------------------------

    def cycles_run(self, args, env=None):
        """Runs a cycles command: its own us/cycle and the CPU time (user + system) it used."""
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        out, err = proc.communicate()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {err.strip()}")
        return last_json(out), usage.ru_utime + usage.ru_stime

    def cycles(self):
        # Many short rounds: fsync latency comes in spells, and the median of the same-round
        # ratios ignores a spell that hit one program and not the other.
        rounds = 3 if self.o.quick else 7
        n_local = 50 if self.o.quick else 100
        n_ref = 30 if self.o.quick else 50
        core_dir = os.path.join(self.work, "core-locks")
        floor_dir = os.path.join(self.work, "floor-locks")
        for d in (core_dir, floor_dir):
            os.mkdir(d, 0o700)
        samples = {"floor": [], "core": [], "reference": []}
        cpu = {"floor": [], "core": []}
        for r in range(rounds):  # interleaved, so a slow spell of the disk hits all three
            log(f"acquire/release cycles, round {r + 1} of {rounds}")
            for name, args in (("floor", [self.floor, "cycles", floor_dir, str(n_local)]),
                               ("core", [self.stress, "cycles", core_dir, self.root, str(n_local)])):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                done, after = self.cycles_run(args)
                samples[name].append(done["us_per_cycle"])
                cpu[name].append((after - before.ru_utime - before.ru_stime) * 1e6 / n_local)
            if self.reference:
                samples["reference"].append(last_json(
                    run([self.reference, "cycles", "repo", self.root, str(n_ref)],
                        env=self.ref_env()).stdout)["us_per_cycle"])
        result = {name: {"us_per_cycle": statistics.median(v), "samples": v}
                  for name, v in samples.items() if v}
        for name, v in cpu.items():  # CPU per cycle, process start included (~1%)
            result[name]["cpu_us_per_cycle"] = statistics.median(v)
        result["cycles_per_run"] = {"floor": n_local, "core": n_local, "reference": n_ref,
                                    "rounds": rounds}
        # Ratios of the same round's figures, then the median over rounds.
        result["core_over_floor"] = statistics.median(
            c / f for c, f in zip(samples["core"], samples["floor"]))
        if samples["reference"]:
            result["reference_over_core"] = statistics.median(
                r / c for r, c in zip(samples["reference"], samples["core"]))
        self.results["cycles"] = result
        return result

    # 4. Contention -------------------------------------------------------------------

    def contend(self, name, make_command, env, rounds, processes=4):
        counter = os.path.join(self.work, f"counter-{name}")
        with open(counter, "w") as f:
            f.write("0")
        started = time.monotonic()
        procs = [subprocess.Popen(make_command(counter, rounds), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(processes)]
        ended = [0.0] * processes
        outputs = [("", "")] * processes

        def wait(i):
            outputs[i] = procs[i].communicate()
            ended[i] = time.monotonic()

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(processes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = max(ended) - started
        done = []
        for i, (out, err) in enumerate(outputs):
            if procs[i].returncode != 0:
                raise RuntimeError(f"{name} stress process exited {procs[i].returncode}: "
                                   f"{out.strip()[-300:]} {err.strip()[-300:]}")
            done.append(last_json(out))
        with open(counter) as f:
            final = int(f.read().strip() or "0")
        acquired = sum(d["acquired"] for d in done)
        rates = [rounds / (end - started) for end in ended]
        return {
            "processes": processes, "cycles_each": rounds, "acquired": acquired,
            "counter": final, "lost_updates": acquired - final, "wall_s": wall,
            "per_second": acquired / wall, "fairness": min(rates) / max(rates),
            "finish_s": sorted(end - started for end in ended),
            "contended": sum(d.get("contended", 0) for d in done),
            "spurious_malformed": sum(d.get("spurious_malformed", 0) for d in done),
        }

    def contention(self):
        n_core = 100 if self.o.quick else 300
        n_ref = 50 if self.o.quick else 150
        core_dir = os.path.join(self.work, "stress-locks")
        os.mkdir(core_dir, 0o700)
        log(f"contention: 4 core processes x {n_core} cycles")
        result = {"core": self.contend(
            "core", lambda counter, n: [self.stress, "stress", core_dir, self.root, counter, str(n)],
            None, n_core)}
        if self.reference:
            log(f"contention: 4 reference processes x {n_ref} cycles")
            result["reference"] = self.contend(
                "reference",
                lambda counter, n: [self.reference, "stress", "repo", self.root, counter, str(n)],
                self.ref_env(), n_ref)
            # Node's start (~0.6 s a process, 4 at once on this machine) is inside the
            # reference's wall time; its own cycle rate is what the startup leaves.
        self.results["contention"] = result
        return result


# Report ------------------------------------------------------------------------------

def fmt_ms(value):
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def report(results, quick):
    lines = []
    add = lines.append
    machine = results["machine"]
    add(f"apnea-locks benchmarks ({'quick' if quick else 'full'} run), {machine['date']}")
    add(f"machine: {machine['cpus']} CPUs, {machine['cpu']}, kernel {machine['kernel']}, "
        f"load average {machine['load']}")
    add("")
    add("1. Inspection: `status --json` vs reference `classify-all` and the floor "
        "(`bench_floor scan`), whole process: median wall (min), peak RSS; core/floor is the "
        "median of same-round ratios")
    add(f"{'entries':>8} {'core ms':>15} {'core MiB':>9} {'us/entry':>9} {'floor ms':>9} "
        f"{'ref ms':>9} {'ref MiB':>8} {'ref/core':>9} {'core/floor':>11} {'ref/floor':>10}")
    inspection = results["inspection"]
    base = inspection["0"]["core"]["median_ms"]
    for size, row in inspection.items():
        core = row["core"]
        ref = row.get("reference")
        per_entry = (core["median_ms"] - base) * 1e3 / int(size) if int(size) else None
        per_entry_text = "-" if per_entry is None else f"{per_entry:.2f}"
        core_ms = f"{fmt_ms(core['median_ms'])} ({fmt_ms(core['min_ms'])})"
        ref_ms = fmt_ms(ref["median_ms"]) if ref else "not run"
        ref_mib = f"{ref['rss_kib'] / 1024:.0f}" if ref else "-"
        ratio = f"{ref['median_ms'] / core['median_ms']:.1f}x" if ref else "-"
        floor = row["floor"]["median_ms"]
        ref_floor = f"{ref['median_ms'] / floor:.1f}x" if ref else "-"
        add(f"{int(size):>8} {core_ms:>15} {core['rss_kib'] / 1024:>9.1f} {per_entry_text:>9} "
            f"{fmt_ms(floor):>9} {ref_ms:>9} {ref_mib:>8} {ratio:>9} "
            f"{row['core_over_floor']:>10.2f}x {ref_floor:>10}")
    one = {size: row["core_1job"] for size, row in inspection.items() if "core_1job" in row}
    if one:
        add("   one job (`--jobs 1`): " + "; ".join(
            f"{int(size):,} entries {fmt_ms(o['median_ms'])} ms, "
            f"{inspection[size]['core_1job_over_floor']:.2f}x the floor"
            for size, o in one.items()))
    fl = results.get("fleet")
    if fl:
        ref = fl.get("reference_ms_per_area")
        add(f"   fleet: {fl['areas']} areas of {fl['entries']} entries, one process each: core "
            f"{fmt_ms(fl['core_ms_per_area'])} ms an area, floor {fmt_ms(fl['floor_ms_per_area'])}"
            f" ({fl['core_over_floor']:.2f}x)"
            + (f", reference {fmt_ms(ref)} ({ref / fl['core_ms_per_area']:.0f}x the core)"
               if ref else ""))
    add("")
    sc = results["syscalls"]
    add(f"2. System calls, `strace -f -c` of status at {sc['entries']} entries "
        f"({sc['lock_entries']} locks, {sc['distinct_pids']} distinct owner pids)")
    add(f"   total {sc['total']} = {sc['per_entry']:.2f} per entry "
        f"({sc['per_entry_marginal']:.2f} per entry above the empty area's {sc['empty_area_total']})")
    per_call = ", ".join(f"{name} {count / sc['entries']:.2f}"
                         for name, count in sorted(sc["per_call"].items(), key=lambda kv: -kv[1])
                         if count / sc["entries"] >= 0.01)
    add(f"   per entry: {per_call}")
    if "reference_per_entry_marginal" in sc:
        add(f"   reference classify-all: {sc['reference_per_entry_marginal']:.2f} per entry "
            "above its empty-area run")
    add("")
    cy = results["cycles"]
    runs = cy["cycles_per_run"]
    add(f"3. Acquire/release cycle of one repository lock on {results['machine']['tmp']} "
        f"(median of {runs['rounds']} interleaved rounds)")
    add(f"{'':>10} {'us/cycle':>9} {'cycles/s':>9} {'vs floor':>9} {'CPU us/cycle':>13}")
    for name in ("floor", "core", "reference"):
        if name in cy:
            us = cy[name]["us_per_cycle"]
            ratio = us / cy["floor"]["us_per_cycle"]
            cpu = cy[name].get("cpu_us_per_cycle")
            cpu_text = f"{cpu:.0f}" if cpu is not None else "-"
            add(f"{name:>10} {us:>9.0f} {1e6 / us:>9.0f} {ratio:>8.2f}x {cpu_text:>13}")
    add(f"   core/floor (same-round ratio) {cy['core_over_floor']:.2f}x"
        + (f"; reference/core {cy['reference_over_core']:.2f}x" if "reference_over_core" in cy
           else ""))
    add("")
    co = results["contention"]
    add("4. Contention: 4 processes on one lock, each a fixed number of cycles "
        "(slow read-modify-write of a counter inside)")
    add(f"{'':>10} {'cycles':>7} {'per s':>7} {'fairness':>9} {'lost':>5} "
        f"{'contended':>10} {'spurious malformed':>19}")
    for name in ("core", "reference"):
        if name in co:
            c = co[name]
            add(f"{name:>10} {c['acquired']:>7} {c['per_second']:>7.0f} {c['fairness']:>9.2f} "
                f"{c['lost_updates']:>5} {c['contended']:>10} {c['spurious_malformed']:>19}")
    add("   fairness: slowest process's rate / fastest's (1.00 = all finished together); "
        "per s: all cycles / wall time")
    add("")
    add("Targets")
    for line in targets(results):
        add("   " + line)
    return "\n".join(lines)


def targets(results):
    out = []

    def check(ok, text):
        out.append(f"{'PASS' if ok else 'MISS'}  {text}")

    ins = results["inspection"]
    if "10000" in ins and "reference" in ins["10000"]:
        ratio = ins["10000"]["reference"]["median_ms"] / ins["10000"]["core"]["median_ms"]
        check(ratio >= 20, f"10k entries: {ratio:.1f}x faster than the reference (>= 20x)")
    for size, limit in (("0", 1.2), ("1000", 1.3), ("10000", 1.0), ("100000", 1.0)):
        if size in ins:
            ratio = ins[size]["core_over_floor"]
            check(ratio <= limit, f"{int(size):,} entries: {ratio:.2f}x the floor (<= {limit}x)")
    empty = ins["0"]["core"]
    check(empty["median_ms"] < 2, f"empty area: {empty['median_ms']:.2f} ms median, "
          f"{empty['min_ms']:.2f} ms fastest run (< 2 ms)")
    if "100000" in ins:
        rss = ins["100000"]["core"]["rss_kib"] / 1024
        check(rss < 16, f"100k entries: peak RSS {rss:.1f} MiB (< 16 MiB)")
        base = ins["0"]["core"]["median_ms"]
        small = (ins["10000"]["core"]["median_ms"] - base) / 10_000
        large = (ins["100000"]["core"]["median_ms"] - base) / 100_000
        check(large <= small * 1.5,
              f"linear: {large * 1e3:.2f} us/entry at 100k vs {small * 1e3:.2f} at 10k (<= 1.5x)")
    sc = results["syscalls"]
    per_lock = sc["total"] / sc["lock_entries"]
    check(sc["per_entry"] <= SYSCALLS_PER_ENTRY_LANDED,
          f"{sc['per_entry']:.2f} syscalls per entry ({per_lock:.2f} per lock entry) "
          f"(<= {SYSCALLS_PER_ENTRY_LANDED}, the landed figure)")
    cy = results["cycles"]
    check(cy["core_over_floor"] <= 1.1, f"cycle: {cy['core_over_floor']:.2f}x the floor (<= 1.1x)")
    co = results["contention"]["core"]
    check(co["lost_updates"] == 0 and co["spurious_malformed"] == 0,
          f"contention: {co['lost_updates']} lost updates, {co['spurious_malformed']} "
          "spurious malformed (0)")
    return out


def machine_info(tmp):
    try:
        fs = run(["findmnt", "-n", "-o", "FSTYPE", "-T", tmp]).stdout.strip()
    except Exception:  # noqa: BLE001 - only a label
        fs = "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except Exception:  # noqa: BLE001
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
            "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "tmp": f"{tmp} ({fs})", "date": time.strftime("%Y-%m-%d %H:%M %Z")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="meson build folder (release)")
    parser.add_argument("--reference", help="apnea-peer; without it only the core is measured")
    parser.add_argument("--quick", action="store_true",
                        help="smaller run: no 100k area, fewer runs and cycles")
    parser.add_argument("--no-reference-100k", action="store_true",
                        help="skip the reference at 100k entries (it takes ~5 s a run)")
    parser.add_argument("--json", help="also write the raw figures to this file")
    parser.add_argument("--tmp", default="/tmp", help="where the work folder goes (default /tmp)")
    options = parser.parse_args()
    for tool in ("hyperfine", "strace", "/usr/bin/time"):
        if shutil.which(tool) is None:
            sys.exit(f"bench: {tool} is missing (scripts/dev bench installs it)")
    started = time.monotonic()
    bench = Bench(options)
    try:
        bench.results["machine"] = machine_info(options.tmp)
        if bench.reference:
            run([bench.reference, "lock-dir"], env=bench.ref_env())  # first use installs npm packages
        phases = bench.results["phase_seconds"] = {}

        def phase(name, step):
            begun = time.monotonic()
            value = step()
            phases[name] = round(time.monotonic() - begun, 1)
            log(f"{name}: {phases[name]} s")
            return value

        areas = phase("areas", lambda: bench.make_areas(
            QUICK_SIZES if options.quick else ENTRY_SIZES))
        phase("inspection", lambda: bench.inspection(areas))
        phase("fleet", bench.fleet)
        phase("syscalls", lambda: bench.syscalls(areas))
        phase("cycles", bench.cycles)
        phase("contention", bench.contention)
    finally:
        begun = time.monotonic()
        bench.close()
        log(f"clean-up: {time.monotonic() - begun:.1f} s")
    bench.results["seconds"] = time.monotonic() - started
    text = report(bench.results, options.quick)
    print(text)
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in bench.results["phase_seconds"].items())
    print(f"\n(took {bench.results['seconds']:.0f} s: {phases})")
    if options.json:
        with open(options.json, "w") as f:
            json.dump(bench.results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
