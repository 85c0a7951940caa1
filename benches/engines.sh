#!/usr/bin/env bash
# Engine benchmark: polars (Rust, 177 MB `_polars_runtime`), DataFusion
# (Rust, `.dynsym` only) and pyarrow (Arrow C++), the engines of
# tests/engines.rs, each running its 4 queries on a 4-thread pool
# (tests/engines/engine_*.py) with every query captured by the real capture
# sidecar (--call-graph dwarf by default, at 499 Hz). Then, per engine, RUNS
# times:
#   (a) jobprof process --force RESULT_DIR --no-inline --formats
#       folded,summary, with an empty symbol cache (--cache-dir, emptied
#       first) and again with the cache that run left
#   (b) perf script -f --no-inline --symfs worker_0/symfs --kallsyms
#       worker_0/kallsyms, once per shard, one after another, text to a
#       file: the peer's cost before any folding
# and prints each run, the medians, the ratios (b)/(a), and peak RSS:
# jobprof's over the whole run (empty cache) against perf script's largest
# over its shards, with /usr/bin/time -v's "Maximum resident set size".
#
#   bash benches/engines.sh [--engines "polars datafusion pyarrow velox"]
#        [--call-graph dwarf] [--seconds 1] [--runs 3] [--keep DIR]
#        [--venv DIR] [--velox-venv DIR] [--jobprof BIN]
# --keep DIR reuses the captures made there before; --venv a Python venv
# with the engines (default target/engines-venv, made by .ci/run or
# tests/engines.rs with the pinned wheels); --velox-venv the one with
# pyvelox 0.2.0 and pyarrow 19.0.1 (default target/velox-venv, made by
# tests/engines.rs: pyvelox needs pyarrow 19); --jobprof times another jobprof
# binary (e.g. main's, for a before/after figure).
#
# Needs root (or perf_event_paranoid <= 1), perf and /usr/bin/time. Builds
# jobprof and jobprof-record in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

engines="polars datafusion pyarrow" cg=dwarf seconds=1 runs=3 keep= venv=target/engines-venv jobprof=
velox_venv=target/velox-venv
while [ $# -gt 0 ]; do
  case "$1" in
    --engines) engines=$2; shift 2 ;;
    --call-graph) cg=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    --velox-venv) velox_venv=$2; shift 2 ;;
    --jobprof) jobprof=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "engines.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in perf /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "engines.sh: $tool is required" >&2; exit 1; }
done
[ -x "$venv/bin/python" ] || { echo "engines.sh: no venv at $venv (bash .ci/run or cargo test --test integration engines:: makes it)" >&2; exit 1; }

if [ -n "$keep" ]; then work=$keep; mkdir -p "$work"; else work=$(mktemp -d); fi
cache_dir=$(bench_cache_dir)
if [ -n "$keep" ]; then trap 'rm -rf "$cache_dir"' EXIT; else trap 'rm -rf "$work" "$cache_dir"' EXIT; fi
cache=$cache_dir/symbol-cache
bin=$(release_dir .)
recorder=$bin/jobprof-record
# Nothing to build when every capture exists and another jobprof is timed.
missing=0
for engine in $engines; do [ -d "$work/$engine-$cg/worker_0" ] || missing=1; done
if [ -z "$jobprof" ] || [ "$missing" = 1 ]; then
  cargo build --release --locked --quiet -p jobprof -p jobprof-record
fi
jobprof=${jobprof:-$bin/jobprof}

# drive TOKENS: the benchmark driver, outside the worker's process tree as
# a job's is (a child of the worker would be in its profile): runs each
# `jobprof-record ASK` the worker asks for, a line on stdin, and answers
# `ok` (or `failed`, and stops) on stdout.
drive() {
  local ask
  while read -r ask; do
    # shellcheck disable=SC2086 # the ask is words: start --query q1
    if "$recorder" $ask --token-dir "$1" --worker 0 --timeout 300 >/dev/null 2>>"$work/driver.log"; then
      echo ok
    else
      echo failed; return 1
    fi
  done
}

# capture ENGINE RESULT: the engine's 4 queries under the real sidecar.
capture() {
  local engine=$1 result=$2 tokens=$work/tokens-$1
  rm -rf "$tokens"; mkdir -p "$tokens" "$result"
  local asks=$work/asks-$engine answers=$work/answers-$engine
  rm -f "$asks" "$answers"; mkfifo "$asks" "$answers"
  # Each side opens the answers first, then the asks: no open waits forever.
  local py=$venv/bin/python
  [ "$engine" = velox ] && py=$velox_venv/bin/python
  "$py" "tests/engines/engine_$engine.py" \
    "$tokens/.perf_sidecar_ready_w0" "$seconds" <"$answers" >"$asks" &
  local worker=$!
  drive "$tokens" >"$answers" <"$asks" &
  local driver=$!
  "$recorder" sidecar --token-dir "$tokens" --worker 0 --pid "$worker" --out "$result" \
    --staging "$work/staging-$engine" --frequency 499 --call-graph "$cg" \
    --start-timeout 120 --stop-timeout 60 >"$work/sidecar-$engine.log" 2>&1
  wait "$worker"
  wait "$driver"
  rm -f "$asks" "$answers"
}

# measure FILE: "user+system seconds, peak RSS KiB" of a /usr/bin/time -v file.
measure() {
  awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} /Maximum resident/ {m=$2}
    END {printf "%.2f %d\n", u + s, m}' "$1"
}

for engine in $engines; do
  result=$work/$engine-$cg
  [ -d "$result/worker_0" ] || capture "$engine" "$result"
  w=$result/worker_0
  shards=$(ls "$w"/q*/perf.data* | wc -l)
  echo "== $engine, --call-graph $cg: $shards shards, $(du -cb "$w"/q*/perf.data* | tail -1 | cut -f1) bytes, $(nproc) cores"
  all_cold= all_warm= all_perf= rss_cold= rss_warm= rss_perf=
  for ((r = 1; r <= runs; r++)); do
    t0=$(date +%s%N) perf_rss=0 perf_cpu=0
    for f in "$w"/q*/perf.data*; do
      /usr/bin/time -v -o "$work/perf.time" perf script -f --no-inline --symfs "$w/symfs" \
        --kallsyms "$w/kallsyms" -i "$f" >"$work/perf.script" 2>/dev/null
      read -r c m < <(measure "$work/perf.time")
      perf_cpu=$(awk -v a="$perf_cpu" -v b="$c" 'BEGIN {print a + b}')
      [ "$m" -gt "$perf_rss" ] && perf_rss=$m
    done
    perf_ms=$(ms "$t0")
    rm -rf "$cache"
    for run in cold warm; do
      # Outputs of another build may name more (jobprof then keeps them and
      # fails): every run writes afresh.
      rm -f "$w"/q*/.postprocess-complete
      t0=$(date +%s%N)
      /usr/bin/time -v -o "$work/jobprof.time" "$jobprof" process --force --no-inline -q \
        --formats folded,summary --cache-dir "$cache" "$result" >/dev/null 2>"$work/jobprof.err"
      eval "${run}_ms=$(ms "$t0")"
      read -r c m < <(measure "$work/jobprof.time")
      eval "${run}_cpu=$c ${run}_rss=$m"
    done
    echo "run $r: jobprof ${cold_ms} ms, ${cold_cpu} s CPU, ${cold_rss} KiB peak (empty cache); ${warm_ms} ms, ${warm_cpu} s CPU, ${warm_rss} KiB (warm) | perf script --no-inline ${perf_ms} ms, ${perf_cpu} s CPU, ${perf_rss} KiB peak (largest shard)"
    all_cold="$all_cold $cold_ms" all_warm="$all_warm $warm_ms" all_perf="$all_perf $perf_ms"
    rss_cold="$rss_cold $cold_rss" rss_warm="$rss_warm $warm_rss" rss_perf="$rss_perf $perf_rss"
  done
  jk=$(echo "$all_cold" | median) jw=$(echo "$all_warm" | median) pf=$(echo "$all_perf" | median)
  rk=$(echo "$rss_cold" | median) rw=$(echo "$rss_warm" | median) rp=$(echo "$rss_perf" | median)
  echo "$engine: medians over $runs runs: jobprof ${jk} ms empty cache, ${jw} ms warm; perf script ${pf} ms"
  awk -v k="$jk" -v w="$jw" -v p="$pf" -v e="$engine" \
    'BEGIN { printf "%s: ratio perf/jobprof, wall: %.2fx empty cache, %.2fx warm\n", e, p / k, p / w }'
  awk -v k="$rk" -v w="$rw" -v p="$rp" -v e="$engine" \
    'BEGIN { printf "%s: peak RSS: jobprof %.0f MiB empty cache, %.0f MiB warm; perf script %.0f MiB; jobprof/perf %.2fx empty, %.2fx warm\n", e, k / 1024, w / 1024, p / 1024, k / p, w / p }'
done
