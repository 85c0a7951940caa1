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
# `jobprof process` in seconds per million switch-outs, native
# (`--symbolizer auto`) and with `perf script` (`--symbolizer perf`). Prints medians and
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
# sidecar W DIR ARGS...: starts the sidecar of worker index W for $WPID,
# waits until ready. Sets SPID_W and TOK_W.
sidecar() {
  local w=$1 d=$2
  shift 2
  rm -rf "$d"
  mkdir -p "$d/tok" "$d/out"
  "$REC" sidecar --token-dir "$d/tok" --worker "$w" --out "$d/out" --pid "$WPID" \
    --staging "$d/staging" --symfs-limit 64M --frequency 99 "$@" 2>"$d/sidecar.log" &
  eval "SPID_$w=$!"
  "$REC" wait-ready --token-dir "$d/tok" --worker "$w" --timeout 1200 >/dev/null
}
end_sidecar() {
  "$REC" shutdown --token-dir "$2/tok" --worker "$1" --timeout 1200 >/dev/null
  eval "wait \$SPID_$1" || true
}
wait_armed() { until [ "$(grep -c "armed the next capture" "$1/sidecar.log" || true)" -ge "$2" ]; do sleep 0.2; done; }
drv() { "$REC" "$1" --token-dir "$3/tok" --worker "$4" --query "$2" --timeout 1200 >/dev/null; }
# bytes_per_s DIR W: perf.data bytes of its captures per second of sampling.
bytes_per_s() {
  local total=0 q
  for q in "$1"/out/worker_"$2"/*/; do
    total=$((total + $(cat "$q"perf.data* 2>/dev/null | wc -c)))
  done
  awk -v b="$total" -v n="$RUNS" -v w="$WINDOW" 'BEGIN {printf "%.0f", b / n / w}'
}

# one NAME LABEL: both sidecars armed on the running worker $WPID ($OUT):
# plain sampling as worker index 0, --off-cpu as index 1; each run measures
# armed, plain, armed, --off-cpu back to back, so that the drift of a shared
# machine hits both modes alike.
one() {
  local name=$1 label=$2 r a1 s1 a2 s2 pc=() oc=() po=()
  local dp=$WORK/$name-plain do=$WORK/$name-off-cpu
  sidecar 0 "$dp"
  sidecar 1 "$do" --off-cpu
  for r in $(seq "$RUNS"); do
    wait_armed "$dp" "$r"; wait_armed "$do" "$r"
    a1=$(rate "$OUT"); drv start "q$r" "$dp" 0; s1=$(rate "$OUT"); drv stop "q$r" "$dp" 0
    a2=$(rate "$OUT"); drv start "q$r" "$do" 1; s2=$(rate "$OUT"); drv stop "q$r" "$do" 1
    pc+=("$(ratio "$s1" "$a1")") oc+=("$(ratio "$s2" "$a2")") po+=("$(ratio "$s2" "$s1")")
    echo "$label: run $r: work/s armed $a1, plain $s1, armed $a2, --off-cpu $s2"
  done
  end_sidecar 0 "$dp"
  end_sidecar 1 "$do"
  echo "$label: throughput while sampling / while armed (median): plain $(m "${pc[@]}")," \
    "--off-cpu $(m "${oc[@]}"); --off-cpu / plain $(m "${po[@]}")"
  local sp so
  sp=$(bytes_per_s "$dp" 0) so=$(bytes_per_s "$do" 1)
  echo "$label: capture bytes/s plain $sp, --off-cpu $so ($(ratio "$so" "$sp")x)"
}

# processed LABEL NAME: the off-CPU pass of both symbolizers over the
# --off-cpu captures of worker NAME, once the worker is gone (beside a
# running 1,000-thread worker `jobprof process` got 17 s of CPU in 11 min).
processed() {
  off_cpu_pass "$1" "$2" "$WORK/$2-off-cpu" auto
  off_cpu_pass "$1" "$2" "$WORK/$2-off-cpu" perf
}

# The off-CPU pass of `jobprof process --symbolizer SYM` over captures DIR:
# LABEL NAME DIR SYM.
off_cpu_pass() {
  local t0 t1 log sw secs
  log=$WORK/$2-process-$4.log
  t0=$(date +%s%N)
  "$JP" process --force --symbolizer "$4" "$3/out" >"$log" 2>&1 || true
  t1=$(date +%s%N)
  sw=$(sed -n 's/.*off-CPU: \([0-9]*\) switch-outs.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  secs=$(sed -n 's/.*off-CPU: .* ms (\([0-9.]*\) s)$/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
  echo "$1: jobprof process --symbolizer $4 of the $RUNS --off-cpu captures $(((t1 - t0) / 1000000)) ms," \
    "of which the off-CPU pass $secs s for $sw switch-outs" \
    "($(awk -v s="$secs" -v n="$sw" 'BEGIN {if (n >= 100000) printf "%.1f s per million", s / n * 1e6; else print "too few for a per-million figure"}'))"
}

echo "jobprof-record $("$REC" --version | cut -d' ' -f2), $(perf --version), $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); RUNS=$RUNS WINDOW=$WINDOW"
OUT=$WORK/pingpong.out
"$WORK/pingpong" "$PAIRS" "$OUT" &
WPID=$!
until [ -s "$OUT" ]; do sleep 0.1; done
one pingpong "switch-heavy ($((2 * PAIRS)) threads ping-ponging)"
kill "$WPID"; wait "$WPID" 2>/dev/null || true
processed "switch-heavy ($((2 * PAIRS)) threads ping-ponging)" pingpong
OUT=$WORK/units.out
"$WORK/units" 0 "$BUSY" "$OUT" &
WPID=$!
until [ -s "$OUT" ]; do sleep 0.1; done
one units "compute-bound ($BUSY busy threads)"
kill "$WPID"; wait "$WPID" 2>/dev/null || true
processed "compute-bound ($BUSY busy threads)" units
