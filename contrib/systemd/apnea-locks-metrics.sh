#!/bin/sh
# apnea-locks-metrics [TEXTFILE_DIR]: refreshes the Prometheus metrics of every account's Apnea
# lock area for node_exporter's textfile collector (default directory: Debian's
# /var/lib/prometheus/node-exporter). Run as root by apnea-locks-metrics.service.
#
# Each area /tmp/apnea-<uid>/operation-locks is read by `apnea-locks check --prometheus` as
# its own account (runuser drops root's privileges first: the area's checks are that
# account's, as Apnea's are), and the metrics go to apnea-locks-<uid>.prom, written to a
# temporary name and renamed into place (the collector never sees half a file). Files of
# areas that are gone are removed. Areas under another TMPDIR than /tmp are not found.
set -u
dir="${1:-/var/lib/prometheus/node-exporter}"
tmp_root="${APNEA_LOCKS_TMPDIR:-/tmp}"
bin="${APNEA_LOCKS_BIN:-apnea-locks}"
[ -d "$dir" ] || { echo "apnea-locks-metrics: no directory $dir" >&2; exit 1; }
status=0
seen=" "
for area in "$tmp_root"/apnea-*/operation-locks; do
  [ -d "$area" ] || continue
  top="${area%/operation-locks}"
  uid="${top##*/apnea-}"
  case "$uid" in '' | *[!0-9]*) continue ;; esac
  # Only an account's own area (as Apnea creates it): never act for whoever made the name.
  [ "$(stat -c %u "$top")" = "$uid" ] || continue
  user="$(getent passwd "$uid" | cut -d: -f1)"
  [ -n "$user" ] || continue
  out="$dir/apnea-locks-$uid.prom"
  # check exits 0..3 (OK..UNKNOWN) and writes the metrics in every case.
  runuser -u "$user" -- "$bin" check --prometheus --lock-dir "$area" >"$out.tmp.$$"
  if grep -q '^apnea_locks_scrape_success' "$out.tmp.$$"; then
    mv -f "$out.tmp.$$" "$out"
    seen="$seen$uid "
  else
    rm -f "$out.tmp.$$"
    echo "apnea-locks-metrics: no metrics for $area (uid $uid)" >&2
    status=1
  fi
done
for file in "$dir"/apnea-locks-*.prom; do
  [ -e "$file" ] || continue
  uid="${file##*/apnea-locks-}"
  uid="${uid%.prom}"
  case "$seen" in *" $uid "*) ;; *) rm -f "$file" ;; esac
done
exit "$status"
