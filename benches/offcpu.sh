#!/usr/bin/env bash
# The cost of `jobprof-record sidecar --off-cpu` (issue 28), side by side in
# one run, with real perf and two workers that count their own work:
#   - switch-heavy: PAIRS pairs of threads ping-ponging on condition
#     variables (benches/programs/pingpong.c; 500 pairs = 1,000 threads);
#   - compute-bound: BUSY CPU-bound threads (benches/programs/units.c).
# For each worker and mode (plain sampling at 99 Hz with frame pointers,
# then the same with --off-cpu) RUNS captures of WINDOW seconds each: the
# worker's throughput while armed (perf attached, disabled) and while
# sampling, the ratio of the two (what the capture costs the worker), the
# capture's size per second, and for --off-cpu the off-CPU pass of
# `jobprof process` in seconds per million switch-outs. Prints medians and
# the ratio --off-cpu / plain. Needs root (or perf_event_paranoid <= -1),
# tracefs, perf and gcc.
#
#   benches/offcpu.sh                      # 500 pairs, 2 busy, 3 runs of 5 s
#   PAIRS=500 BUSY=2 RUNS=5 WINDOW=10 benches/offcpu.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benches/lib.sh"
PAIRS=${PAIRS:-500}
BUSY=${BUSY:-2}
RUNS=${RUNS:-3}
WINDOW=${WINDOW:-5}

if [ -z "${REC:-}" ] || [ -z "${JP:-}" ]; then
  cargo build --release -q -p jobprof-record -p jobprof --manifest-path "$ROOT/Cargo.toml"
  REC=$(release_dir "$ROOT")/jobprof-record
  JP=$(release_dir "$ROOT")/jobprof
fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
gcc -O2 -fno-omit-frame-pointer -pthread -o "$WORK/pingpong" "$ROOT/benches/programs/pingpong.c"
gcc -O2 -fno-omit-frame-pointer -pthread -o "$WORK/units" "$ROOT/benches/programs/units.c"
ulimit -n "$(ulimit -Hn)"

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m() { echo "$@" | median; }
# rate FILE: work per second over WINDOW seconds.
rate() {
  local a b
  a=$(cat "$1")
  sleep "$WINDOW"
  b=$(cat "$1")
  echo "$a $b" | awk '{printf "%d\n", ($3 - $1) / (($4 - $2) / 1e9)}'
}
ratio() { awk -v x="$1" -v b="$2" 'BEGIN {printf "%.3f", x / b}'; }
sidecar() {
  local d=$1
  shift
  rm -rf "$d"
  mkdir -p "$d/tok" "$d/out"
  TOK=$d/tok
  "$REC" sidecar --token-dir "$TOK" --worker 0 --out "$d/out" --pid "$WPID" \
    --staging "$d/staging" --symfs-limit 64M --frequency 99 "$@" 2>"$d/sidecar.log" &
  SPID=$!
  "$REC" wait-ready --token-dir "$TOK" --worker 0 --timeout 1200 >/dev/null
}
end_sidecar() {
  "$REC" shutdown --token-dir "$TOK" --worker 0 --timeout 1200 >/dev/null
  wait "$SPID" || true
}
wait_armed() { until [ "$(grep -c "armed the next capture" "$1/sidecar.log" || true)" -ge "$2" ]; do sleep 0.2; done; }
drv() { "$REC" "$1" --token-dir "$TOK" --worker 0 --query "$2" --timeout 1200 >/dev/null; }
# bytes_per_s DIR: perf.data bytes of its captures per second of sampling.
bytes_per_s() {
  local total=0 q
  for q in "$1"/out/worker_0/*/; do
    total=$((total + $(cat "$q"perf.data* 2>/dev/null | wc -c)))
  done
  awk -v b="$total" -v n="$RUNS" -v w="$WINDOW" 'BEGIN {printf "%.0f", b / n / w}'
}

# one NAME LABEL: RUNS captures in each mode of the running worker $WPID ($OUT).
one() {
  local name=$1 label=$2 mode d r armed=() plain=() off=() a s
  declare -A cost size
  for mode in plain off-cpu; do
    d=$WORK/$name-$mode
    if [ "$mode" = off-cpu ]; then sidecar "$d" --off-cpu; else sidecar "$d"; fi
    local costs=()
    for r in $(seq "$RUNS"); do
      wait_armed "$d" "$r"
      a=$(rate "$OUT")
      drv start "q$r"
      s=$(rate "$OUT")
      drv stop "q$r"
      armed+=("$a")
      costs+=("$(ratio "$s" "$a")")
      if [ "$mode" = off-cpu ]; then off+=("$s"); else plain+=("$s"); fi
    done
    end_sidecar
    cost[$mode]=$(m "${costs[@]}")
    size[$mode]=$(bytes_per_s "$d")
  done
  echo "$label: work/s armed $(m "${armed[@]}"), sampling plain $(m "${plain[@]}"), --off-cpu $(m "${off[@]}")"
  echo "$label: sampling/armed throughput plain ${cost[plain]}, --off-cpu ${cost[off-cpu]};" \
    "--off-cpu/plain $(ratio "$(m "${off[@]}")" "$(m "${plain[@]}")")"
  echo "$label: capture bytes/s plain ${size[plain]}, --off-cpu ${size[off-cpu]}" \
    "($(ratio "${size[off-cpu]}" "${size[plain]}")x)"
  local t0 t1 log sw secs
  log=$WORK/$name-process.log
  t0=$(date +%s%N)
  "$JP" process "$WORK/$name-off-cpu/out" >"$log" 2>&1 || true
  t1=$(date +%s%N)
  sw=$(sed -n 's/.*off-CPU: \([0-9]*\) switch-outs.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  secs=$(sed -n 's/.*off-CPU: .* ms (\([0-9.]*\) s)$/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  echo "$label: jobprof process of the --off-cpu captures $(((t1 - t0) / 1000000)) ms;" \
    "off-CPU pass $secs s for $sw switch-outs =" \
    "$(awk -v s="$secs" -v n="$sw" 'BEGIN {if (n > 0) printf "%.2f", s / n * 1e6; else print "n/a"}') s per million"
}

echo "jobprof-record $("$REC" --version | cut -d' ' -f2), $(perf --version), $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); RUNS=$RUNS WINDOW=$WINDOW"
OUT=$WORK/pingpong.out
"$WORK/pingpong" "$PAIRS" "$OUT" &
WPID=$!
until [ -s "$OUT" ]; do sleep 0.1; done
one pingpong "switch-heavy ($((2 * PAIRS)) threads ping-ponging)"
kill "$WPID"; wait "$WPID" 2>/dev/null || true
OUT=$WORK/units.out
"$WORK/units" 0 "$BUSY" "$OUT" &
WPID=$!
until [ -s "$OUT" ]; do sleep 0.1; done
one units "compute-bound ($BUSY busy threads)"
kill "$WPID"; wait "$WPID" 2>/dev/null || true
