#!/usr/bin/env bash
# Measures jobprof-record on this machine, with real perf and a real
# multi-threaded worker (tests/programs/phases.c):
#   - attach time: how long `jobprof-record start` takes (list the threads,
#     start one disabled perf per shard of 128 threads, ping each, enable
#     all) for workers of 1,000 and 4,000 threads, and how long `stop` takes;
#   - the CPU cost of an idle sidecar (ready, no capture running) over
#     IDLE_SECS seconds, from /proc/PID/stat (user + system time).
# Prints the median of RUNS starts/stops per size. Needs root (or
# perf_event_paranoid <= 1), perf and gcc; a few GiB of memory for perf's
# per-thread ring buffers at 4,000 threads.
#
#   benches/record.sh                    # sizes 1000 4000, 3 runs, 60 s idle
#   SIZES="1000" RUNS=5 IDLE_SECS=30 benches/record.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benches/lib.sh"
SIZES=${SIZES:-1000 4000}
RUNS=${RUNS:-3}
IDLE_SECS=${IDLE_SECS:-60}
FREQ=${FREQ:-99}

cargo build --release -q -p jobprof-record --manifest-path "$ROOT/Cargo.toml"
REC=$(release_dir "$ROOT")/jobprof-record
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
gcc -O1 -fno-omit-frame-pointer -pthread -o "$WORK/phases" "$ROOT/tests/programs/phases.c"
ulimit -n "$(ulimit -Hn)"

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
median() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run_sidecar N: a worker with N threads (50 us of work every 200 ms each)
# and its sidecar, until ready. Sets WPID, SPID, TOK.
run_sidecar() {
  local n=$1 d=$WORK/n$1
  mkdir -p "$d/tok" "$d/out"
  "$WORK/phases" "$n" "$d/cue" 50 200000 &
  WPID=$!
  until [ -e "$d/cue.ack" ]; do sleep 0.1; done
  TOK=$d/tok
  "$REC" sidecar --token-dir "$TOK" --worker 0 --out "$d/out" --pid "$WPID" \
    --staging "$d/staging" --frequency "$FREQ" --symfs-limit 64M 2>"$d/sidecar.log" &
  SPID=$!
  "$REC" wait-ready --token-dir "$TOK" --worker 0 --timeout 300 >/dev/null
}

end_sidecar() {
  "$REC" shutdown --token-dir "$TOK" --worker 0 --timeout 600 >/dev/null
  wait "$SPID" || true
  echo Q >"$WORK/n$1/cue"
  wait "$WPID" || true
}

echo "jobprof-record $("$REC" --version | cut -d' ' -f2), $(perf --version), $(nproc) cores"
for n in $SIZES; do
  run_sidecar "$n"
  starts=() stops=()
  for r in $(seq "$RUNS"); do
    t=$(date +%s%N)
    "$REC" start --token-dir "$TOK" --worker 0 --query "b$r" --timeout 600
    starts+=("$(ms_since "$t")")
    sleep 1
    t=$(date +%s%N)
    "$REC" stop --token-dir "$TOK" --worker 0 --query "b$r" --timeout 600
    stops+=("$(ms_since "$t")")
  done
  shards=$(grep -c . "$WORK/n$n/out/worker_0/b1/perf-shards.tsv")
  printf '%5d threads (%d shards): start median %d ms (%s), stop+publish median %d ms (%s)\n' \
    "$((n + 1))" "$((shards - 1))" \
    "$(echo "${starts[*]}" | median)" "${starts[*]}" \
    "$(echo "${stops[*]}" | median)" "${stops[*]}"
  end_sidecar "$n"
done

# Idle: a ready sidecar with nothing to do, next to a 100-thread worker.
run_sidecar 100
t0=$(cpu_ticks "$SPID")
sleep "$IDLE_SECS"
t1=$(cpu_ticks "$SPID")
hz=$(getconf CLK_TCK)
awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$IDLE_SECS" 'BEGIN {
  printf "idle sidecar: %.2f s CPU in %d s = %.3f%% of one core\n", d / hz, s, 100 * d / hz / s }'
end_sidecar 100
