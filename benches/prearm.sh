#!/usr/bin/env bash
# Pre-arming, measured side by side in one run (issue 18), with real perf
# and a worker of N threads of which BUSY are CPU-bound and count their own
# work units (benches/programs/units.c), the rest idle:
#   - `jobprof-record start` latency without pre-arming (--no-prearm: the
#     shards are attached at start, in parallel) and with it (the shards
#     were attached ahead of time; start enables them);
#   - the worker's throughput (work units per second over WINDOW seconds)
#     before arming (sidecar ready, no perf running) and again after the
#     last sidecar ended (the drift of a shared machine), while armed (perf
#     attached, disabled), while sampling at 99 Hz with frame pointers and
#     at 19 Hz with DWARF call graphs (--call-graph dwarf); on a shared
#     machine also the work units per CPU-second of the worker (what the
#     sampling interrupts cost its threads, whatever else runs) and the CPU
#     the perf processes use themselves (% of one core);
#   - the descriptors the armed perf processes and the sidecar hold.
# Prints medians of RUNS runs (and every run). Needs root (or
# perf_event_paranoid <= 1), perf and gcc (or prebuilt REC and UNITS).
#
#   benches/prearm.sh                          # sizes 1000 4000, 3 runs
#   SIZES=1000 RUNS=5 WINDOW=10 benches/prearm.sh
#   REC=/path/jobprof-record UNITS=/path/units benches/prearm.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benches/lib.sh"
SIZES=${SIZES:-1000 4000}
RUNS=${RUNS:-3}
BUSY=${BUSY:-2}
WINDOW=${WINDOW:-5}

if [ -z "${REC:-}" ]; then
  cargo build --release -q -p jobprof-record --manifest-path "$ROOT/Cargo.toml"
  REC=$(release_dir "$ROOT")/jobprof-record
fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
if [ -z "${UNITS:-}" ]; then
  UNITS=$WORK/units
  gcc -O2 -fno-omit-frame-pointer -pthread -o "$UNITS" "$ROOT/benches/programs/units.c"
fi
ulimit -n "$(ulimit -Hn)"

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
m() { echo "$@" | median; }
# ticks STAT...: user + system clock ticks of the processes (0 for none).
ticks() {
  [ $# -gt 0 ] || { echo 0; return; }
  cat "$@" 2>/dev/null | awk '{s += $14 + $15} END {print s + 0}'
}
perf_stats() { for p in $(pgrep -P "$SPID" -x perf); do echo "/proc/$p/stat"; done; }
# rate FILE: over WINDOW seconds, the worker's work units per second, work
# units per CPU-second of the worker, and the CPU % of one core used by the
# sidecar's perf processes ("R E P"; the last two are appended to the
# arrays EFF and PERF named by $2 and $3).
rate() {
  local a b w0 w1 p0 p1 hz stats
  hz=$(getconf CLK_TCK)
  stats=$(perf_stats)
  a=$(cat "$1")
  w0=$(ticks "/proc/$WPID/stat")
  p0=$(ticks $stats)
  sleep "$WINDOW"
  b=$(cat "$1")
  w1=$(ticks "/proc/$WPID/stat")
  p1=$(ticks $stats)
  echo "$a $b $w0 $w1 $p0 $p1 $hz" | awk '{
    s = ($4 - $2) / 1e9; u = $3 - $1
    printf "%d %d %.1f\n", u / s, u / (($6 - $5) / $9), 100 * ($8 - $7) / $9 / s }'
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
  e_before=() e_armed=() e_fp=() e_dwarf=() p_armed=() p_fp=() p_dwarf=()

  # Not pre-armed: every start attaches.
  sidecar "$d/cold" --no-prearm --frequency 99
  for r in $(seq "$RUNS"); do
    read -r r1 e1 _ < <(rate "$d/units")
    before+=("$r1") e_before+=("$e1")
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
    read -r r1 e1 p1 < <(rate "$d/units")
    armed+=("$r1") e_armed+=("$e1") p_armed+=("$p1")
    t=$(date +%s%N)
    drv start "w$r"
    warm+=("$(ms_since "$t")")
    read -r r1 e1 p1 < <(rate "$d/units")
    fp+=("$r1") e_fp+=("$e1") p_fp+=("$p1")
    drv stop "w$r"
  done
  end_sidecar

  # Pre-armed, 19 Hz with DWARF call graphs.
  sidecar "$d/dwarf" --frequency 19 --call-graph dwarf
  for r in $(seq "$RUNS"); do
    wait_armed "$d/dwarf" "$r"
    drv start "d$r"
    read -r r1 e1 p1 < <(rate "$d/units")
    dwarf+=("$r1") e_dwarf+=("$e1") p_dwarf+=("$p1")
    drv stop "d$r"
  done
  end_sidecar

  # Before arming again, now that no sidecar runs: how much the machine
  # itself drifted while this size was measured.
  SPID=0
  after=() e_after=()
  for r in $(seq "$RUNS"); do
    read -r r1 e1 _ < <(rate "$d/units")
    after+=("$r1") e_after+=("$e1")
  done
  kill "$WPID"
  wait "$WPID" 2>/dev/null || true

  b=$(m "${before[*]}")
  eb=$(m "${e_before[*]}")
  printf '%5d threads (%d busy): start not armed %d ms (%s), armed %d ms (%s)\n' \
    "$n" "$BUSY" "$(m "${cold[*]}")" "${cold[*]}" "$(m "${warm[*]}")" "${warm[*]}"
  printf '      units/s:           before %d (%s); after %d (%s); armed %d %s (%s); 99 Hz fp %d %s (%s); 19 Hz dwarf %d %s (%s)\n' \
    "$b" "${before[*]}" "$(m "${after[*]}")" "${after[*]}" \
    "$(m "${armed[*]}")" "$(pct "$(m "${armed[*]}")" "$b")" "${armed[*]}" \
    "$(m "${fp[*]}")" "$(pct "$(m "${fp[*]}")" "$b")" "${fp[*]}" \
    "$(m "${dwarf[*]}")" "$(pct "$(m "${dwarf[*]}")" "$b")" "${dwarf[*]}"
  printf '      units/CPU-second:  before %d (%s); after %d (%s); armed %d %s (%s); 99 Hz fp %d %s (%s); 19 Hz dwarf %d %s (%s)\n' \
    "$eb" "${e_before[*]}" "$(m "${e_after[*]}")" "${e_after[*]}" \
    "$(m "${e_armed[*]}")" "$(pct "$(m "${e_armed[*]}")" "$eb")" "${e_armed[*]}" \
    "$(m "${e_fp[*]}")" "$(pct "$(m "${e_fp[*]}")" "$eb")" "${e_fp[*]}" \
    "$(m "${e_dwarf[*]}")" "$(pct "$(m "${e_dwarf[*]}")" "$eb")" "${e_dwarf[*]}"
  printf '      perf CPU (%% of one core): armed %s (%s); 99 Hz fp %s (%s); 19 Hz dwarf %s (%s)\n' \
    "$(m "${p_armed[*]}")" "${p_armed[*]}" "$(m "${p_fp[*]}")" "${p_fp[*]}" \
    "$(m "${p_dwarf[*]}")" "${p_dwarf[*]}"
  printf '      armed: %d perf processes hold %d descriptors (%d per 1,000 threads), the sidecar %d\n' \
    "$(echo "$perfs" | wc -w)" "$fds" $((fds * 1000 / n)) "$sfds"
done
