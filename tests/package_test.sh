#!/usr/bin/env bash
# tests/package_test.sh DEB: installs the apnea-locks package with dpkg -i, checks what a user
# gets (the command, its man page, the bash completion, the docs and examples), then removes it
# with dpkg -r and checks that every file it installed is gone. Run by `scripts/dev package`.
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

check "dpkg -r removes the package" dpkg -r apnea-locks
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

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
