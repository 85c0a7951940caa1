#!/usr/bin/env bash
# Job-scale benchmark: many small captures of the same large binary, as a
# real job makes them (queries x iterations of one worker), processed by
# `jobprof process` against `perf script` over the same captures and the
# old pipeline's own post-processing, side by side in one run.
#
# Makes (or takes, --job DIR) a result directory of QUERIES x ITERATIONS
# captures of a real C++ engine: DuckDB from its PyPI wheel (a 68 MB
# `_duckdb` library, no frame pointers) running TPC-H-shaped queries on 8
# threads (benches/programs/duckdb_worker.py; each query repeated for at
# least --seconds, as a timed iteration), each query captured by the
# real capture sidecar (jobprof-record sidecar/start/stop/shutdown) with
# `--call-graph dwarf` at 499 Hz. Then, RUNS times, one after the other:
#   (a) jobprof process --force RESULT_DIR                (inline frames on,
#       the default: every output, report.txt and the job pages included),
#       twice: with an empty symbol cache (--cache-dir, emptied first: the
#       first run on a machine) and with the cache that run left (every
#       later run over the same builds)
#   (b) perf script --no-inline --symfs worker_0/symfs, once per shard of
#       every capture, one after another, text to a file: what the peer
#       costs before any folding or drawing
#   (c) the old pipeline's process-perf-captures.sh RESULT_DIR --local
#       --no-inline --force (from ../shared/seed-pipeline, or --old DIR; it
#       needs its own capture layout and says why it refuses another)
# and prints each run, the medians, the ratios (b)/(a) (goal >= 5x) and
# (c)/(a), and the median of summary.json's symbolize_fold timing per
# capture. Then (d), when the old pipeline is there: on fresh copies of the
# old pipeline's own result directories (--old-dirs, default
# ../shared/seed-captures/result_dir_*), its process-perf-captures.sh
# --local --no-inline --force against jobprof process --force (inline
# frames on, the default; empty and warm symbol cache) and jobprof process
# --force --no-inline (the same work as the old pipeline's), RUNS times.
#
#   bash benches/job.sh [--queries 8] [--iterations 3] [--rows 3000000]
#        [--seconds 1] [--frequency 499] [--runs 3] [--keep DIR] [--job RESULT_DIR]
#        [--venv DIR] [--old DIR] [--old-dirs "DIR..."] [--jobprof BIN]
#        [--sidecar-args "ARGS"] [--jobprof-args "ARGS"]
# --keep DIR reuses the job made there before; --venv a Python venv with
# duckdb (made with pip when missing: `python3 -m venv V && V/bin/pip
# install duckdb`); --jobprof times another jobprof binary (e.g. main's,
# for a before/after figure); --sidecar-args more arguments for the
# sidecar that records the job (e.g. "--off-cpu": a job of off-CPU
# captures); --jobprof-args more arguments for every timed `jobprof
# process` (e.g. "--formats folded": only the outputs perf script's text
# stands for, the archive and the job views still written).
#
# Needs root (or perf_event_paranoid <= 1), perf, python3 (venv + pip, or
# a venv with duckdb). Builds jobprof and jobprof-record in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

queries=8 iterations=3 rows=3000000 seconds=1 freq=499 runs=3 keep= job= venv= old= jobprof=
sidecar_args= jobprof_args=
old_dirs=$(ls -d ../shared/seed-captures/result_dir_* 2>/dev/null || true)
while [ $# -gt 0 ]; do
  case "$1" in
    --queries) queries=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --frequency) freq=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --job) job=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --old-dirs) old_dirs=$2; shift 2 ;;
    --jobprof) jobprof=$2; shift 2 ;;
    --sidecar-args) sidecar_args=$2; shift 2 ;;
    --jobprof-args) jobprof_args=$2; shift 2 ;;
    -h|--help) sed -n '2,48p' "$0"; exit 0 ;;
    *) echo "job.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in perf python3; do
  command -v "$tool" >/dev/null || { echo "job.sh: $tool is required" >&2; exit 1; }
done

if [ -n "$keep" ]; then work=$keep; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
result=${job:-$work/result_dir}
perf_root=$result/profiles/perf
bin=$(release_dir .)
recorder=$bin/jobprof-record
# Nothing to build when the job exists and another jobprof is timed.
if [ -z "$jobprof" ] || [ ! -d "$perf_root/worker_0" ]; then
  cargo build --release --locked --quiet -p jobprof -p jobprof-record
fi
jobprof=${jobprof:-$bin/jobprof}

make_job() {
  venv=${venv:-$work/venv}
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet duckdb
  fi
  local w=$work/worker tokens=$work/tokens
  rm -rf "$w" "$tokens"; mkdir -p "$w" "$tokens" "$perf_root"
  mkfifo "$w/cmd"
  "$venv/bin/python" benches/programs/duckdb_worker.py "$w/cmd" "$w/done" "$rows" "$seconds" &
  local worker=$!
  for _ in $(seq 600); do grep -qx ready "$w/done" 2>/dev/null && break; sleep 0.2; done
  grep -qx ready "$w/done" || { echo "job.sh: the DuckDB worker did not start" >&2; exit 1; }
  SLURM_JOB_ID=job "$recorder" sidecar --token-dir "$tokens" --worker 0 --pid "$worker" \
    --out "$perf_root" --staging "$work/staging" --frequency "$freq" \
    --call-graph dwarf $sidecar_args > "$work/sidecar.log" 2>&1 &
  local sidecar=$!
  for _ in $(seq 600); do [ -e "$tokens/.perf_sidecar_ready_w0" ] && break; sleep 0.1; done
  local all=(q01 q03 q05 q06 q09 q13 q18 q21) i q n=0
  for ((i = 1; i <= iterations; i++)); do
    for q in "${all[@]:0:$queries}"; do
      "$recorder" start --token-dir "$tokens" --worker 0 --query "$q.iter$i"
      echo "$q" > "$w/cmd"
      n=$((n + 1))
      while [ "$(grep -cx "$q" "$w/done")" -lt "$i" ]; do sleep 0.02; done
      "$recorder" stop --token-dir "$tokens" --worker 0 --query "$q.iter$i"
    done
  done
  "$recorder" shutdown --token-dir "$tokens" --worker 0 >/dev/null
  wait "$sidecar"
  echo quit > "$w/cmd"
  wait "$worker" 2>/dev/null || true
}

[ -d "$perf_root/worker_0" ] || make_job
caps=$(cd "$perf_root/worker_0" && for d in */; do if [ -e "$d/capture.json" ]; then echo "${d%/}"; fi; done)
ncap=$(echo "$caps" | wc -l)
shards=$(cd "$perf_root/worker_0" && ls $caps | grep -c '^perf\.data' || true)
bytes=$(cd "$perf_root/worker_0" && du -cb $(for c in $caps; do ls "$c"/perf.data*; done) | tail -1 | cut -f1)
echo "job: $result: $ncap captures, $shards perf.data files, $bytes bytes, --call-graph dwarf at $freq Hz, $(nproc) cores"


# CPU seconds (user + system, children included) of what /usr/bin/time ran:
# on a shared machine wall times swing with the load, CPU time much less.
cpu() { awk '{printf "%.2f\n", $1 + $2}' "$1"; }

# The symbol cache of every jobprof run timed here: its own, never the
# user's (~/.cache/jobprof).
cache_dir=$(bench_cache_dir)
cache=$cache_dir/symbol-cache
if [ -n "$keep" ]; then trap 'rm -rf "$cache_dir"' EXIT; else trap 'rm -rf "$work" "$cache_dir"' EXIT; fi
run_jobprof() {
  local t0
  t0=$(date +%s%N)
  /usr/bin/time -o "$work/jobprof.time" -f "%U %S" \
    "$jobprof" process --force $jobprof_args --cache-dir "$cache" "$result" >"$work/jobprof.out" 2>"$work/jobprof.err" || true
  jp_ms=$(ms "$t0")
  jp_cpu=$(cpu "$work/jobprof.time")
}

run_perf() {
  local t0 c f
  t0=$(date +%s%N)
  /usr/bin/time -o "$work/perf.time" -f "%U %S" bash -c '
    for f in "$@"; do perf script -f --no-inline --symfs "$0" -i "$f" 2>/dev/null; done' \
    "$perf_root/worker_0/symfs" $(for c in $caps; do echo "$perf_root/worker_0/$c"/perf.data*; done) \
    > "$work/perf.script"
  perf_ms=$(ms "$t0")
  perf_cpu=$(cpu "$work/perf.time")
}

old_script=
seed=${old:-../shared/seed-pipeline}
if [ -f "$seed/process-perf-captures.sh" ]; then
  # Its layout: X/a/b/*.sh with X/scripts/perf_flamegraph.py.
  mkdir -p "$work/old/a/b" "$work/old/scripts"
  cp "$seed"/*.sh "$work/old/a/b/"
  cp "$seed/perf_flamegraph.py" "$work/old/scripts/"
  old_script=$work/old/a/b/process-perf-captures.sh
fi
run_old() {
  local t0
  old_ms=
  [ -n "$old_script" ] || return 0
  t0=$(date +%s%N)
  if bash "$old_script" "$result" --local --no-inline --force >"$work/old.log" 2>&1; then
    old_ms=$(ms "$t0")
  else
    old_why=$(grep -m1 -i 'error' "$work/old.log" || tail -1 "$work/old.log")
  fi
}

all_jp= all_cold= all_perf= all_old= old_why= cpu_jp= cpu_cold= cpu_perf=
for ((r = 1; r <= runs; r++)); do
  run_perf
  run_old
  rm -rf "$cache"
  run_jobprof
  cold_ms=$jp_ms cold_cpu=$jp_cpu
  run_jobprof
  echo "run $r: jobprof process ${cold_ms} ms, ${cold_cpu} s CPU (empty symbol cache), ${jp_ms} ms, ${jp_cpu} s CPU (warm) | perf script --no-inline ${perf_ms} ms, ${perf_cpu} s CPU | old pipeline --no-inline ${old_ms:-n/a} ms"
  all_jp="$all_jp $jp_ms" all_cold="$all_cold $cold_ms" all_perf="$all_perf $perf_ms" all_old="$all_old $old_ms"
  cpu_jp="$cpu_jp $jp_cpu" cpu_cold="$cpu_cold $cold_cpu" cpu_perf="$cpu_perf $perf_cpu"
done
jp=$(echo "$all_jp" | median) pf=$(echo "$all_perf" | median) od=$(echo "$all_old" | median)
jk=$(echo "$all_cold" | median) jkc=$(echo "$cpu_cold" | median)
jc=$(echo "$cpu_jp" | median) pc=$(echo "$cpu_perf" | median)
grep -h 'symbol store' "$work/jobprof.err" | tail -1 | sed 's/^/last run: /' || true
echo "(a) jobprof process --force (inline frames on): median ${jp} ms with the symbol cache warm, ${jk} ms with it empty, over $runs runs ($((jp / ncap)) ms per capture warm)"
echo "(b) perf script --no-inline --symfs x$shards: median ${pf} ms"
awk -v a="$jp" -v b="$pf" 'BEGIN { printf "ratio (b)/(a), wall, symbol cache warm: %.2fx (goal >= 5x)\n", b / a }'
awk -v a="$jk" -v b="$pf" 'BEGIN { printf "ratio (b)/(a), wall, symbol cache empty: %.2fx\n", b / a }'
awk -v a="$jc" -v b="$pc" -v k="$jkc" 'BEGIN { printf "ratio (b)/(a), CPU: %.2fx warm, %.2fx empty (medians %.2f s; %.2f s and %.2f s)\n", b / a, b / k, b, a, k }'
if [ -n "$od" ]; then
  echo "(c) process-perf-captures.sh --local --no-inline: median ${od} ms"
  awk -v a="$jp" -v c="$od" 'BEGIN { printf "ratio (c)/(a): %.2fx\n", c / a }'
else
  echo "(c) old pipeline: not run (${old_why:-no process-perf-captures.sh; --old DIR})"
fi
# Per-capture symbolize_fold timings from summary.json (the last run).
fold_ms=$(for c in $caps; do
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1])).get("timings",{}); print(round(1000*t.get("symbolize_fold",0)))' \
    "$perf_root/worker_0/$c/summary.json" 2>/dev/null
done | median)
echo "median per-capture symbolize_fold (summary.json timings): ${fold_ms} ms"

[ -n "$old_script" ] && [ -n "$old_dirs" ] || exit 0
# (d) The old pipeline's own result directories, fresh copies each time.
for d in $old_dirs; do
  o_all= j_all= k_all= n_all= why=
  for ((r = 1; r <= runs; r++)); do
    rm -rf "$work/d"; mkdir -p "$work/d"; cp -a "$d" "$work/d/old"; cp -a "$d" "$work/d/new"
    chmod -R u+w "$work/d"
    t0=$(date +%s%N)
    if bash "$old_script" "$work/d/old" --local --no-inline --force >"$work/d/old.log" 2>&1; then
      o_all="$o_all $(ms "$t0")"
    else
      why=$(grep -m1 -i error "$work/d/old.log" || tail -1 "$work/d/old.log")
    fi
    rm -rf "$cache"
    t0=$(date +%s%N)
    "$jobprof" process --force --cache-dir "$cache" "$work/d/new" >/dev/null 2>&1 || true
    k_all="$k_all $(ms "$t0")"
    t0=$(date +%s%N)
    "$jobprof" process --force --cache-dir "$cache" "$work/d/new" >/dev/null 2>&1 || true
    j_all="$j_all $(ms "$t0")"
    # Like for like: the old pipeline's --no-inline names no inline frame.
    t0=$(date +%s%N)
    "$jobprof" process --force --no-inline --cache-dir "$cache" "$work/d/new" >/dev/null 2>&1 || true
    n_all="$n_all $(ms "$t0")"
  done
  o=$(echo "$o_all" | median) j=$(echo "$j_all" | median) n=$(echo "$n_all" | median)
  k=$(echo "$k_all" | median)
  if [ -n "$o" ]; then
    awk -v d="$(basename "$d")" -v o="$o" -v j="$j" -v k="$k" -v n="$n" 'BEGIN { printf "(d) %s: old pipeline --no-inline median %d ms; jobprof process (inline frames on) median %d ms with the symbol cache warm: %.2fx, %d ms with it empty: %.2fx; jobprof process --no-inline median %d ms: %.2fx\n", d, o, j, o / j, k, o / k, n, o / n }'
  else
    echo "(d) $(basename "$d"): old pipeline failed ($why); jobprof process median $j ms warm, $k ms empty cache, --no-inline $n ms"
  fi
done
