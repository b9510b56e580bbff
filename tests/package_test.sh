#!/usr/bin/env bash
# tests/package_test.sh DEB: installs the apnea-locks package with dpkg -i, checks what a user
# gets (the command, its man page, the bash completion, the docs and examples, the unit's
# hardening), enables the metrics timer and runs its service's command once as an
# administrator would, then removes the package with dpkg -r (every file it installed gone,
# no dangling timer link, no metrics file left) and purges it with dpkg -P (nothing of it
# left on the system). Run by `scripts/dev package`.
# Needs root (it changes this machine's packages); ends with "N passed, N failed" or says why
# it skipped.
set -uo pipefail

deb="${1:?usage: tests/package_test.sh path/to/apnea-locks_VERSION_ARCH.deb}"
passed=0 failed=0
check() {  # check DESCRIPTION COMMAND...: one test
  local what="$1"
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok: $what"
  else
    failed=$((failed + 1))
    echo "FAIL: $what"
  fi
}
skip() {
  echo "package test SKIPPED: $*"
  echo "0 passed, 0 failed, 1 skipped"
  exit 0
}

[ -f "$deb" ] || { echo "package test: no such file: $deb"; echo "0 passed, 1 failed"; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "dpkg -i needs root (run it as root, or sudo tests/package_test.sh $deb)"
if dpkg-query -W -f='${Status}' apnea-locks 2>/dev/null | grep -q 'install ok installed'; then
  skip "apnea-locks is already installed on this machine: this test does not replace or remove it"
fi

# Every path named *apnea-locks* on the system before the install: after the purge, no other.
# (Not /var/log, and not man-db's cache of pages this test itself rendered with man.)
named() {
  find /etc /var /usr /lib /opt -xdev -name '*apnea-locks*' 2>/dev/null \
    | grep -v -e '^/var/log/' -e '^/var/cache/man/' | sort
}
before="$(mktemp)"
named >"$before"

version="$(dpkg-deb -f "$deb" Version)"
echo "installing $deb ($(du -k "$deb" | cut -f1) KiB)"
check "dpkg -i installs the package" dpkg -i "$deb"
mapfile -t files < <(dpkg -L apnea-locks)

check "apnea-locks --version prints the package's version" \
  test "$(apnea-locks --version)" = "apnea-locks $version"
check "apnea-locks is /usr/bin/apnea-locks" test "$(command -v apnea-locks)" = /usr/bin/apnea-locks
check "man -w apnea-locks finds the installed page" \
  test "$(man -w apnea-locks 2>/dev/null)" = /usr/share/man/man1/apnea-locks.1.gz
check "the man page renders" bash -c 'MANWIDTH=80 man apnea-locks 2>/dev/null | grep -q "^NAME"'
completion=/usr/share/bash-completion/completions/apnea-locks
check "the bash completion is installed" test -f "$completion"
check "the completion loads and completes the commands" bash -c '
  source "$1"; COMP_WORDS=(apnea-locks re); COMP_CWORD=1; _apnea_locks
  [ "${COMPREPLY[*]}" = reclaim ]' _ "$completion"
check "the docs are under /usr/share/doc/apnea-locks" \
  test -f /usr/share/doc/apnea-locks/runbook.md.gz -o -f /usr/share/doc/apnea-locks/runbook.md
check "debian/copyright is installed" test -f /usr/share/doc/apnea-locks/copyright
check "the systemd units are shipped" test -f /lib/systemd/system/apnea-locks-metrics.timer
check "the alert rules and Nagios examples are shipped" \
  test -f /usr/share/doc/apnea-locks/examples/prometheus/apnea-locks.rules.yml \
    -a -f /usr/share/doc/apnea-locks/examples/nagios/apnea-locks-commands.cfg

# The unit, hardened: systemd-analyze's exposure at most 4.9 ("OK" or better).
unit=/lib/systemd/system/apnea-locks-metrics.service
skipped=0
if command -v systemd-analyze >/dev/null 2>&1; then
  security="$(systemd-analyze security --offline=true "$unit" 2>&1 | tail -n 1)"
  echo "  $security"
  exposure="$(printf '%s\n' "$security" | sed -n 's/.*: \([0-9.]*\) [A-Z]*.*/\1/p')"
  check "systemd-analyze security rates the service OK or better (exposure $exposure <= 4.9)" \
    awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 4.9) }'
else
  echo "SKIP: systemd-analyze is not installed: the unit's exposure is not checked"
  skipped=$((skipped + 1))
fi

# As an administrator would: enable the timer, and run its service's command once (the
# textfile directory made if node-exporter is not installed; removed again at the end).
textfiles=/var/lib/prometheus/node-exporter
made_textfiles=0
[ -d "$textfiles" ] || { mkdir -p "$textfiles"; made_textfiles=1; }
check "systemctl enable apnea-locks-metrics.timer links it into timers.target.wants" bash -c '
  systemctl enable apnea-locks-metrics.timer >/dev/null 2>&1
  test -L /etc/systemd/system/timers.target.wants/apnea-locks-metrics.timer'
if [ -d /run/systemd/system ]; then
  # Under systemd, with the unit's sandbox: what the hardening must not break.
  check "systemctl start apnea-locks-metrics.service succeeds and writes the metrics file" bash -c "
    systemctl daemon-reload && systemctl start apnea-locks-metrics.service &&
    [ \"\$(systemctl show -p Result --value apnea-locks-metrics.service)\" = success ] &&
    test -s $textfiles/apnea-locks.prom"
else
  echo "SKIP: systemd is not running here: the service's command runs outside its sandbox"
  skipped=$((skipped + 1))
  exec_start="$(sed -n 's/^ExecStart=//p' "$unit")"
  check "the service's command writes the metrics file" \
    env -u SUDO_UID bash -c "$exec_start && test -s $textfiles/apnea-locks.prom"
fi

check "dpkg -r removes the package" dpkg -r apnea-locks
check "dpkg -r leaves no timer link behind" \
  bash -c '! ls -d /etc/systemd/system/*/apnea-locks-metrics.* >/dev/null 2>&1'
check "dpkg -r removes the metrics file (node_exporter would export it for ever)" \
  test ! -e "$textfiles/apnea-locks.prom"
left=()
for file in "${files[@]}"; do
  # Directories other packages share (/usr, /usr/share/man/man1, /lib, which usrmerge makes a
  # symlink to usr/lib, ...) stay: dpkg removes a directory only when it is empty. Every file
  # and every other symlink must be gone.
  if [ -e "$file" ] || [ -L "$file" ]; then
    [ -d "$file" ] && continue
    left+=("$file")
  fi
done
check "dpkg -r removed every file it installed (${#files[@]} paths listed)" test ${#left[@]} -eq 0
[ ${#left[@]} -eq 0 ] || printf '  left behind: %s\n' "${left[@]}"
check "/usr/share/doc/apnea-locks is gone" test ! -e /usr/share/doc/apnea-locks
check "dpkg no longer lists the package as installed" \
  bash -c '! dpkg-query -W -f="\${Status}" apnea-locks 2>/dev/null | grep -q "ok installed"'

check "dpkg -P purges the package" dpkg -P apnea-locks
check "dpkg no longer knows the package" bash -c '! dpkg-query -W apnea-locks >/dev/null 2>&1'
leftovers="$(named | comm -13 "$before" - || true)"
check "nothing named apnea-locks that the package or its timer made is left on the system" test -z "$leftovers"
[ -z "$leftovers" ] || printf '  left behind: %s\n' $leftovers
rm -f "$before"
[ "$made_textfiles" -eq 0 ] || rmdir "$textfiles" /var/lib/prometheus 2>/dev/null || true

echo "$passed passed, $failed failed${skipped:+, $skipped skipped}"
[ "$failed" -eq 0 ]
