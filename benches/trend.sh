#!/usr/bin/env bash
# `jobprof trend` at scale (docs/trend.md#scale, issue 39: "100 runs x 22
# queries x 8 workers in seconds and bounded memory"). Synthesizes the
# series once with benches/trend-scale.py (every capture a processed
# capture's files, its stacks.folded one of 20 files of 1,500 stacks over
# 400 functions; FOLDED_FROM=DIR takes every stacks.folded under DIR
# instead, e.g. the trend tests' real DuckDB captures kept with
# JOBPROF_TEST_TREND_RUNS), then times `jobprof trend -q` on it REPEAT
# times: wall seconds, user and system CPU and peak RSS from
# /usr/bin/time -v, the median of each. With BEFORE=an older jobprof, the
# two run alternately in the same session, the ratio of the median walls
# is printed, and their trend.json (less the time it was written) must be
# identical.
#
#   benches/trend.sh                      # 100 runs x 22 queries x 8 workers x 1
#   BEFORE=/tmp/jobprof-old REPEAT=3 benches/trend.sh 100 22 8 1
#   benches/trend.sh 20 22 8 3            # 3 replicates per query
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benches/lib.sh"
RUNS=${1:-100} QUERIES=${2:-22} WORKERS=${3:-8} REPS=${4:-1}
REPEAT=${REPEAT:-3}
if [ -z "${JOBPROF:-}" ]; then
  cargo build --release -q -p jobprof --bin jobprof --manifest-path "$ROOT/Cargo.toml"
  JOBPROF=$(release_dir "$ROOT")/jobprof
fi
WORK=${TREND_SCALE_DIR:-${TMPDIR:-/tmp}/jobprof-trend-scale}
SERIES=$WORK/series-$RUNS-$QUERIES-$WORKERS-$REPS${FOLDED_FROM:+-real}
if [ ! -d "$SERIES" ]; then
  rm -rf "$SERIES.tmp"
  python3 "$ROOT/benches/trend-scale.py" "$SERIES.tmp" "$RUNS" "$QUERIES" "$WORKERS" "$REPS" \
    ${FOLDED_FROM:+"$FOLDED_FROM"}
  mv "$SERIES.tmp" "$SERIES"
fi

# one NAME BINARY: one timed run; appends "wall user sys rss_kb" to WORK/NAME.times.
one() {
  local out=$WORK/out-$1 log=$WORK/$1.time
  rm -rf "$out"
  /usr/bin/time -v "$2" trend "$SERIES"/run_* -o "$out" -q >/dev/null 2>"$log" || {
    cat "$log" >&2
    exit 1
  }
  awk -F': ' '
    /Elapsed \(wall clock\)/ { n = split($2, t, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + t[i] }
    /User time/ { u = $2 } /System time/ { s = $2 } /Maximum resident/ { r = $2 }
    END { print w, u, s, r }' "$log" >>"$WORK/$1.times"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

report() {
  local f=$WORK/$1.times
  printf '%-7s wall %6.2f s  user %6.2f s  sys %5.2f s  peak RSS %4.0f MB  (median of %d)\n' "$1" \
    "$(cut -d' ' -f1 "$f" | median)" "$(cut -d' ' -f2 "$f" | median)" \
    "$(cut -d' ' -f3 "$f" | median)" "$(cut -d' ' -f4 "$f" | median | awk '{ print $1 / 1024 }')" \
    "$(wc -l <"$f")"
}

rm -f "$WORK"/*.times
captures=$(find "$SERIES" -name stacks.folded | wc -l)
echo "jobprof trend: $RUNS runs x $QUERIES queries x $WORKERS workers x $REPS replicates ($captures captures), $(nproc) cores"
for _ in $(seq "$REPEAT"); do
  [ -n "${BEFORE:-}" ] && one before "$BEFORE"
  one after "$JOBPROF"
done
[ -n "${BEFORE:-}" ] && report before
report after
if [ -n "${BEFORE:-}" ]; then
  b=$(cut -d' ' -f1 "$WORK/before.times" | median)
  a=$(cut -d' ' -f1 "$WORK/after.times" | median)
  awk -v b="$b" -v a="$a" 'BEGIN { printf "before / after wall: %.1fx\n", b / a }'
  strip() { grep -v '"generated":' "$1"; }
  if cmp -s <(strip "$WORK/out-before/trend.json") <(strip "$WORK/out-after/trend.json"); then
    echo "trend.json: identical (less \"generated\")"
  else
    echo "trend.json: DIFFERS between before and after" >&2
    exit 1
  fi
fi
