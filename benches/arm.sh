#!/usr/bin/env bash
# Arming a switch-heavy worker (issue 35, item 9), two recorders side by
# side in one run: a worker of NSLEEP sleeping threads and 4 threads that
# each create a short-lived thread every GAP_US µs
# (tests/programs/switchy.c), a sidecar with --off-cpu and shards of PER
# threads. Each run times `wait-ready` (the sidecar's preflight, symbol
# snapshot and the arming of the first capture), takes the arming time from
# the sidecar's log ("armed the next capture in N ms"), then captures one
# 2 s query and checks it is valid. BEFORE and AFTER alternate; prints
# every run, the medians and the ratio BEFORE / AFTER. Needs root (or
# perf_event_paranoid <= 1), perf with tracefs, and gcc.
#
#   benches/arm.sh BEFORE_RECORDER AFTER_RECORDER
#   NSLEEP=2000 PER=128 RUNS=3 benches/arm.sh old/jobprof-record new/jobprof-record
#   NSPAWN=0 NSLEEP=4000 RUNS=1 benches/arm.sh ...   # an idle worker: no creating threads
#
# AFTER defaults to this checkout's release build; BEFORE to the one of
# BASE (a commit, default f526a6b: before the pool grew past the cores),
# built in a temporary worktree.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benches/lib.sh"
NSLEEP=${NSLEEP:-2000}
PER=${PER:-128}
GAP_US=${GAP_US:-500}
NSPAWN=${NSPAWN:-4}
RUNS=${RUNS:-3}
BASE=${BASE:-f526a6b}

WORK=$(mktemp -d)
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -d "$WORK/base" ]; then git -C "$ROOT" worktree remove --force "$WORK/base" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

AFTER=${2:-}
if [ -z "$AFTER" ]; then
  cargo build --release -q -p jobprof-record --manifest-path "$ROOT/Cargo.toml"
  AFTER=$(release_dir "$ROOT")/jobprof-record
fi
BEFORE=${1:-}
if [ -z "$BEFORE" ]; then
  git -C "$ROOT" worktree add -q --detach "$WORK/base" "$BASE"
  cargo build --release -q -p jobprof-record --manifest-path "$WORK/base/Cargo.toml"
  BEFORE=$(release_dir "$WORK/base")/jobprof-record
fi
gcc -O1 -fno-omit-frame-pointer -pthread -o "$WORK/switchy" "$ROOT/tests/programs/switchy.c"
ulimit -n "$(ulimit -Hn)"

m() { echo "$@" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# one REC DIR: prints "READY_MS ARM_MS" for one run.
one() {
  local rec=$1 d=$2
  mkdir -p "$d/tok" "$d/out"
  "$WORK/switchy" "$NSLEEP" "$d/cue" "$NSPAWN" "$GAP_US" &
  local wpid=$!
  until [ -f "$d/cue.ack" ]; do sleep 0.05; done
  local t0
  t0=$(date +%s%N)
  "$rec" sidecar --token-dir "$d/tok" --worker 0 --out "$d/out" --pid "$wpid" \
    --staging "$d/staging" --symfs-limit 64M --threads-per-shard "$PER" --off-cpu \
    2>"$d/sidecar.log" &
  local spid=$!
  "$rec" wait-ready --token-dir "$d/tok" --worker 0 --timeout 1200 >/dev/null
  local ready=$((($(date +%s%N) - t0) / 1000000))
  "$rec" start --token-dir "$d/tok" --worker 0 --query q1 --timeout 1200 >/dev/null
  sleep 2
  "$rec" stop --token-dir "$d/tok" --worker 0 --query q1 --timeout 1200 >/dev/null
  "$rec" shutdown --token-dir "$d/tok" --worker 0 --timeout 1200 >/dev/null
  wait "$spid" || true
  echo Q >"$d/cue"
  wait "$wpid" || true
  grep -q '"valid": true' "$d/out/worker_0/q1/capture.json" || {
    echo "invalid capture in $d" >&2
    exit 1
  }
  local arm
  arm=$(grep -m1 -o 'armed the next capture in [0-9]* ms' "$d/sidecar.log" | grep -o '[0-9]*')
  echo "$ready $arm"
}

echo "switch-heavy worker: $NSLEEP sleeping threads, $NSPAWN creating one every $GAP_US us;" \
  "shards of $PER, --off-cpu; $(perf --version), $(nproc) cores," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A ready arm
for r in $(seq "$RUNS"); do
  for which in before after; do
    if [ $which = before ]; then rec=$BEFORE; else rec=$AFTER; fi
    read -r rd am < <(one "$rec" "$WORK/$which$r")
    ready[$which]="${ready[$which]:-} $rd"
    arm[$which]="${arm[$which]:-} $am"
    echo "run $r $which: wait-ready $rd ms, arming $am ms"
  done
done
for which in before after; do
  echo "$which: wait-ready median $(m ${ready[$which]}) ms (${ready[$which]# }), arming median" \
    "$(m ${arm[$which]}) ms (${arm[$which]# })"
done
echo "ratio before/after (arming medians): $(echo "$(m ${arm[before]}) $(m ${arm[after]})" |
  awk '{printf "%.2f", $1 / $2}')"
