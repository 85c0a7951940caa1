#!/usr/bin/env bash
# Before/after: two jobprof binaries timed on the same result directories,
# interleaved (before, after, before, ...), `jobprof process --force
# --formats all` with a symbol cache of the bench's own (warm: one run of
# each binary first). Prints every run's wall and CPU seconds and peak RSS
# (`/usr/bin/time -v`), then the medians per binary and directory. On a
# shared machine the interleaving keeps the load alike for both.
#
#   bash benches/before-after.sh RUNS BEFORE_BIN AFTER_BIN RESULT_DIR...
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,9p' "$0"; exit 2; }
runs=$1 before=$2 after=$3; shift 3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
one() { # BIN DIR -> "wall cpu rss"
  /usr/bin/time -v -o "$work/time" "$1" process --force --formats all \
    --cache-dir "$work/cache" "$2" >/dev/null 2>&1
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, a, ":"); w = 0; for (k = 1; k <= n; k++) w = w * 60 + a[k] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
    END { printf "%.2f %.2f %d\n", w, u + s, r }' "$work/time"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
for dir in "$@"; do
  one "$before" "$dir" >/dev/null; one "$after" "$dir" >/dev/null
  : > "$work/rows"
  for i in $(seq "$runs"); do
    for side in before after; do
      bin=$before; [ "$side" = after ] && bin=$after
      echo "$side $i $(one "$bin" "$dir")" | tee -a "$work/rows"
    done
  done
  for side in before after; do
    col() { awk -v s="$side" -v c="$1" '$1 == s { print $c }' "$work/rows" | median; }
    echo "$dir $side: median wall $(col 3) s, CPU $(col 4) s, peak RSS $(col 5) KiB ($runs runs)"
  done
done
