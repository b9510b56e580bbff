#!/usr/bin/env python3
"""scripts/dev deps with apt-get, dpkg-query, node and systemctl replaced by stubs on PATH
(nothing is installed): `deps` (what `run` and `build` call) asks for no monitoring stack
and no test tool; `deps --test` installs the monitoring stacks while a policy-rc.d denies
every service start, removes that policy-rc.d afterwards, and never starts a daemon."""
import os
import pathlib
import stat
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
MONITORING = {"prometheus", "prometheus-node-exporter", "nagios4-core"}
TEST_TOOLS = {"nodejs", "npm", "strace", "man-db", "groff-base", "spin"}


def stub(directory, name, body):
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def run_deps(args, installed=(), apt_install="", systemd=False):
    """`scripts/dev deps ARGS` with `installed` packages present; `apt_install` is shell run
    by apt-get install first; `systemd`: as on a machine where systemd runs."""
    with tempfile.TemporaryDirectory(prefix="apnea-locks-dev-deps.") as scratch:
        scratch = pathlib.Path(scratch)
        bin_dir = scratch / "bin"
        bin_dir.mkdir()
        log = scratch / "log"
        policy = scratch / "policy-rc.d"
        # Nothing is installed; apt-get records each install with whether a policy denied starts.
        present = " ".join(installed)
        stub(bin_dir, "dpkg-query",
             f'for last; do :; done\nfor p in {present}; do [ "$p" = "$last" ] && {{ printf "install ok installed"; exit 0; }}; done\nexit 1\n')
        stub(bin_dir, "apt-get",
             f'if [ "$1" = install ]; then\n'
             f'  {apt_install.replace("POLICY", str(policy))}\n'
             f'  shift; shift; shift\n'
             f'  if [ -x "{policy}" ] && ! "{policy}" x start; then p=denied; else p=allowed; fi\n'
             f'  echo "install $p $*" >>"{log}"\n'
             f'fi\nexit 0\n')
        stub(bin_dir, "systemctl", f'echo "systemctl $*" >>"{log}"\n')
        stub(bin_dir, "node", 'echo 22\n')
        stub(bin_dir, "sudo", '"$@"\n')
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", APNEA_DEV_POLICY_RC_D=str(policy),
                   APNEA_DEV_SYSTEMD_DIR=str(scratch if systemd else scratch / "no-systemd"))
        done = subprocess.run([str(ROOT / "scripts" / "dev"), "deps", *args], env=env,
                              capture_output=True, text=True, start_new_session=True)
        lines = log.read_text().splitlines() if log.exists() else []
        return done, lines, policy.exists()


def installs(lines):
    out = {}
    for line in lines:
        words = line.split()
        if words[0] == "install":
            for package in words[2:]:
                out[package] = words[1]
    return out


failures = []
done, lines, left = run_deps([])
if done.returncode != 0:
    failures.append(f"deps exited {done.returncode}: {done.stderr}")
asked = installs(lines)
for package in sorted((MONITORING | TEST_TOOLS) & asked.keys()):
    failures.append(f"deps (run, build) installs {package}, which only the tests need")
if "g++" not in asked:
    failures.append(f"deps does not install the compiler: {lines}")

done, lines, left = run_deps(["--test"])
if done.returncode != 0:
    failures.append(f"deps --test exited {done.returncode}: {done.stderr}")
asked = installs(lines)
for package in sorted(MONITORING):
    if asked.get(package) != "denied":
        failures.append(f"deps --test: {package} {'installed with service starts allowed' if package in asked else 'not installed'}")
for package in sorted(TEST_TOOLS - {"nodejs", "npm"}):
    if package not in asked:
        failures.append(f"deps --test does not install {package}")
if left:
    failures.append("deps --test left its policy-rc.d behind")
if any(line.startswith("systemctl") and " start" in line for line in lines):
    failures.append(f"deps --test started a service: {lines}")

# A developer's own node-exporter: installed before, so never stopped or disabled.
done, lines, left = run_deps(["--test"], installed=["prometheus-node-exporter"], systemd=True)
disabled = [line for line in lines if line.startswith("systemctl disable")]
if not any("prometheus.service" in line for line in disabled):
    failures.append(f"deps --test did not disable the prometheus it installed: {lines}")
if any("prometheus-node-exporter" in line for line in disabled):
    failures.append(f"deps --test disabled the developer's own node-exporter: {lines}")

# apt-get interrupted (SIGTERM to the whole run): the policy-rc.d does not outlive it.
done, lines, left = run_deps(["--test"], apt_install='[ -e "POLICY" ] && kill -TERM 0')
if done.returncode == 0:
    failures.append("the interrupted deps --test was not interrupted (the check proves nothing)")
if left:
    failures.append("an interrupted deps --test left its policy-rc.d behind (no service would start again)")

for failure in failures:
    print("FAIL:", failure)
print(f"dev deps: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
