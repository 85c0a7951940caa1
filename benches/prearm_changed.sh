#!/usr/bin/env bash
# What `start` of a pre-armed capture costs when the worker changed while
# armed, side by side with when it did not (issue 18): a worker of N idle
# threads (benches/programs/spawner.c) that, on cue, loads libm and creates
# one thread. perf 6.1 records neither while its events are disabled, so
# the sidecar attaches such a capture anew at `start` (capture.json:
# `reattached_because`); unchanged, `start` only enables the armed shards.
# Prints, per size, the median `jobprof-record start` latency of RUNS runs
# (every run in parentheses) for both cases, and checks that each capture
# took the path it should. Needs root (or perf_event_paranoid <= 1), perf
# and gcc.
#
#   benches/prearm_changed.sh                  # sizes 1000, 3 runs
#   SIZES="1000 4000" RUNS=5 benches/prearm_changed.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benches/lib.sh"
SIZES=${SIZES:-1000}
RUNS=${RUNS:-3}

if [ -z "${REC:-}" ]; then
  cargo build --release -q -p jobprof-record --manifest-path "$ROOT/Cargo.toml"
  REC=$(release_dir "$ROOT")/jobprof-record
fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
gcc -O2 -pthread -o "$WORK/spawner" "$ROOT/benches/programs/spawner.c" -ldl
ulimit -n "$(ulimit -Hn)"

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
m() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
drv() { "$REC" "$1" --token-dir "$TOK" --worker 0 --query "$2" --timeout 1200 >/dev/null; }
# wait_armed K: until the K-th capture is armed.
wait_armed() {
  until [ "$(grep -c "armed the next capture" "$D/sidecar.log" || true)" -ge "$1" ]; do
    sleep 0.2
  done
}
# took Q: "reattached" or "armed", from Q's capture.json.
took() {
  if grep -q '"reattached_because": "' "$D/out/worker_0/$1/capture.json"; then
    echo reattached
  else echo armed; fi
}

echo "jobprof-record $("$REC" --version | cut -d' ' -f2), $(perf --version), $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $SIZES; do
  D=$WORK/n$n
  mkdir -p "$D/tok" "$D/out"
  TOK=$D/tok
  "$WORK/spawner" $((n - 1)) "$D/cue" &
  WPID=$!
  until [ "$(ls /proc/$WPID/task | wc -l)" -ge "$n" ]; do sleep 0.1; done
  "$REC" sidecar --token-dir "$TOK" --worker 0 --out "$D/out" --pid "$WPID" \
    --staging "$D/staging" --symfs-limit 64M --frequency 99 2>"$D/sidecar.log" &
  SPID=$!
  "$REC" wait-ready --token-dir "$TOK" --worker 0 --timeout 1200 >/dev/null
  same=() changed=() k=1
  for r in $(seq "$RUNS"); do
    wait_armed $k
    t=$(date +%s%N)
    drv start "same$r"
    same+=("$(ms_since "$t")")
    drv stop "same$r"
    k=$((k + 1))
    wait_armed $k
    threads=$(ls /proc/$WPID/task | wc -l)
    touch "$D/cue"
    until [ "$(ls /proc/$WPID/task | wc -l)" -gt "$threads" ]; do sleep 0.05; done
    t=$(date +%s%N)
    drv start "changed$r"
    changed+=("$(ms_since "$t")")
    drv stop "changed$r"
    k=$((k + 1))
    [ "$(took "same$r")" = armed ] || echo "same$r was attached anew" >&2
    [ "$(took "changed$r")" = reattached ] || echo "changed$r was not attached anew" >&2
  done
  "$REC" shutdown --token-dir "$TOK" --worker 0 --timeout 1200 >/dev/null
  wait "$SPID" || true
  kill "$WPID"
  wait "$WPID" 2>/dev/null || true
  printf '%5d threads: start armed, unchanged %d ms (%s); changed while armed (attached anew) %d ms (%s)\n' \
    "$n" "$(m "${same[*]}")" "${same[*]}" "$(m "${changed[*]}")" "${changed[*]}"
  grep -m1 "attached anew" "$D/sidecar.log" || true
done
