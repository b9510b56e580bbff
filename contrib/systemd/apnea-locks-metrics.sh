#!/bin/sh
# apnea-locks-metrics [TEXTFILE_DIR]: refreshes the Prometheus metrics of every account's Apnea
# lock area for node_exporter's textfile collector (default directory: Debian's
# /var/lib/prometheus/node-exporter). Run as root by apnea-locks-metrics.service.
#
# One `apnea-locks check --all-users --prometheus`: each area <tmpdir>/apnea-<uid>/operation-locks
# is read by a child process that has become that account (the area's checks are that
# account's, as Apnea's are), and the metrics of every area, each series labelled with its
# lock_dir and user, go to apnea-locks.prom, written to a name the collector ignores and
# renamed into place (it never sees half a file). An apnea-* entry that is no account's own
# area (a symlink, another owner than its name's uid) is only counted, in
# apnea_locks_foreign_entries. The per-uid files apnea-locks-<uid>.prom of earlier versions
# are removed. Areas under another TMPDIR than /tmp (APNEA_LOCKS_TMPDIR) are not found.
set -u
dir="${1:-/var/lib/prometheus/node-exporter}"
tmp_root="${APNEA_LOCKS_TMPDIR:-/tmp}"
bin="${APNEA_LOCKS_BIN:-apnea-locks}"
[ -d "$dir" ] || { echo "apnea-locks-metrics: no directory $dir" >&2; exit 1; }
out="$dir/apnea-locks.prom"
new="$dir/.apnea-locks.prom.$$"
# check exits 0..3 (OK..UNKNOWN) and writes the metrics whenever the temp dir could be listed.
# Run by an administrator through sudo, the file is still this script's own (its name is
# fixed): $SUDO_UID, which makes check refuse --output-file, is not passed on.
said="$(env -u SUDO_UID TMPDIR="$tmp_root" "$bin" check --all-users --prometheus --output-file "$new" 2>&1)"
status=0
if [ -f "$new" ] && grep -q '^apnea_locks_build_info' "$new"; then
  mv -f "$new" "$out"
else
  rm -f "$new"
  echo "apnea-locks-metrics: no metrics for the areas under $tmp_root: $said" >&2
  status=1
fi
rm -f "$dir"/apnea-locks-*.prom
exit "$status"
