#!/usr/bin/env bash
# Pre-arming, measured side by side in one run (issue 18), with real perf
# and a worker of N threads of which BUSY are CPU-bound and count their own
# work units (benches/programs/units.c), the rest idle:
#   - `jobprof-record start` latency without pre-arming (--no-prearm: the
#     shards are attached at start, in parallel) and with it (the shards
#     were attached ahead of time; start enables them);
#   - the worker's throughput (work units per second over WINDOW seconds)
#     before arming (sidecar ready, no perf running), while armed (perf
#     attached, disabled), while sampling at 99 Hz with frame pointers and
#     at 19 Hz with DWARF call graphs (--call-graph dwarf);
#   - the descriptors the armed perf processes and the sidecar hold.
# Prints medians of RUNS runs (and every run). Needs root (or
# perf_event_paranoid <= 1), perf and gcc (or prebuilt REC and UNITS).
#
#   benches/prearm.sh                          # sizes 1000 4000, 3 runs
#   SIZES=1000 RUNS=5 WINDOW=10 benches/prearm.sh
#   REC=/path/jobprof-record UNITS=/path/units benches/prearm.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SIZES=${SIZES:-1000 4000}
RUNS=${RUNS:-3}
BUSY=${BUSY:-2}
WINDOW=${WINDOW:-5}

if [ -z "${REC:-}" ]; then
  cargo build --release -q -p jobprof-record --manifest-path "$ROOT/Cargo.toml"
  REC=$ROOT/target/x86_64-unknown-linux-gnu/release/jobprof-record
fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
if [ -z "${UNITS:-}" ]; then
  UNITS=$WORK/units
  gcc -O2 -fno-omit-frame-pointer -pthread -o "$UNITS" "$ROOT/benches/programs/units.c"
fi
ulimit -n "$(ulimit -Hn)"

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# rate FILE: the worker's work units per second over WINDOW seconds.
rate() {
  local a b
  a=$(cat "$1")
  sleep "$WINDOW"
  b=$(cat "$1")
  echo "$a $b" | awk '{printf "%d\n", ($3 - $1) * 1e9 / ($4 - $2)}'
}
pct() { awk -v x="$1" -v b="$2" 'BEGIN {printf "%+.1f%%", 100 * (x - b) / b}'; }

# sidecar DIR ARGS...: starts a sidecar for $WPID, waits until ready (armed,
# unless --no-prearm). Sets SPID and TOK.
sidecar() {
  local d=$1
  shift
  rm -rf "$d"
  mkdir -p "$d/tok" "$d/out"
  TOK=$d/tok
  "$REC" sidecar --token-dir "$TOK" --worker 0 --out "$d/out" --pid "$WPID" \
    --staging "$d/staging" --symfs-limit 64M "$@" 2>"$d/sidecar.log" &
  SPID=$!
  "$REC" wait-ready --token-dir "$TOK" --worker 0 --timeout 1200 >/dev/null
}
end_sidecar() {
  "$REC" shutdown --token-dir "$TOK" --worker 0 --timeout 1200 >/dev/null
  wait "$SPID" || true
}
# armed_count DIR: captures armed so far.
armed_count() { grep -c "armed the next capture" "$1/sidecar.log" || true; }
wait_armed() {
  until [ "$(armed_count "$1")" -ge "$2" ]; do sleep 0.2; done
}
drv() { "$REC" "$1" --token-dir "$TOK" --worker 0 --query "$2" --timeout 1200 >/dev/null; }

echo "jobprof-record $("$REC" --version | cut -d' ' -f2), $(perf --version), $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $SIZES; do
  d=$WORK/n$n
  mkdir -p "$d"
  "$UNITS" $((n - BUSY - 1)) "$BUSY" "$d/units" &
  WPID=$!
  until [ -s "$d/units" ]; do sleep 0.1; done
  before=() armed=() fp=() dwarf=() cold=() warm=()

  # Not pre-armed: every start attaches.
  sidecar "$d/cold" --no-prearm --frequency 99
  for r in $(seq "$RUNS"); do
    before+=("$(rate "$d/units")")
    t=$(date +%s%N)
    drv start "c$r"
    cold+=("$(ms_since "$t")")
    drv stop "c$r"
  done
  end_sidecar

  # Pre-armed, 99 Hz with frame pointers.
  sidecar "$d/fp" --frequency 99
  fds=0
  perfs=$(pgrep -P "$SPID" -x perf || true)
  for p in $perfs; do fds=$((fds + $(ls "/proc/$p/fd" | wc -l))); done
  sfds=$(ls "/proc/$SPID/fd" | wc -l)
  for r in $(seq "$RUNS"); do
    wait_armed "$d/fp" "$r"
    armed+=("$(rate "$d/units")")
    t=$(date +%s%N)
    drv start "w$r"
    warm+=("$(ms_since "$t")")
    fp+=("$(rate "$d/units")")
    drv stop "w$r"
  done
  end_sidecar

  # Pre-armed, 19 Hz with DWARF call graphs.
  sidecar "$d/dwarf" --frequency 19 --call-graph dwarf
  for r in $(seq "$RUNS"); do
    wait_armed "$d/dwarf" "$r"
    drv start "d$r"
    dwarf+=("$(rate "$d/units")")
    drv stop "d$r"
  done
  end_sidecar
  kill "$WPID"
  wait "$WPID" 2>/dev/null || true

  b=$(echo "${before[*]}" | median)
  printf '%5d threads (%d busy): start not armed %d ms (%s), armed %d ms (%s)\n' \
    "$n" "$BUSY" "$(echo "${cold[*]}" | median)" "${cold[*]}" \
    "$(echo "${warm[*]}" | median)" "${warm[*]}"
  printf '      throughput (units/s, median): before arming %d (%s); armed %d %s (%s); ' \
    "$b" "${before[*]}" "$(echo "${armed[*]}" | median)" \
    "$(pct "$(echo "${armed[*]}" | median)" "$b")" "${armed[*]}"
  printf '99 Hz fp %d %s (%s); 19 Hz dwarf %d %s (%s)\n' \
    "$(echo "${fp[*]}" | median)" "$(pct "$(echo "${fp[*]}" | median)" "$b")" "${fp[*]}" \
    "$(echo "${dwarf[*]}" | median)" "$(pct "$(echo "${dwarf[*]}" | median)" "$b")" "${dwarf[*]}"
  printf '      armed: %d perf processes hold %d descriptors (%d per 1,000 threads), the sidecar %d\n' \
    "$(echo "$perfs" | wc -w)" "$fds" $((fds * 1000 / n)) "$sfds"
done
