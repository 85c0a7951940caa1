#!/usr/bin/env bash
# End-to-end post-processing benchmark: `jobprof process` against the old way.
#
# Records a real multi-threaded workload (fixtures/src/demo_worker.c) into a
# capture of >= 3 shards with the real capture sidecar (jobprof-record
# sidecar/start/stop/shutdown; scripts/perf-capture.sh, plain `perf record`
# per group of threads, if the recorder is not built), then times,
# one after the other in the same run, on the same capture:
#   (a) jobprof process --force RESULT_DIR
#   (b) the old way: `perf script` per shard one after another, concatenated
#       into one text file, inferno-collapse-perf, inferno-flamegraph, and
#       gzip -1 of the text.
#   (c) jobprof process --force --symbolizer perf RESULT_DIR: the same
#       pipeline with `perf script` instead of the native symbolizer, side
#       by side with (a) --symbolizer native (the issue-16 figure, for fp
#       and for dwarf captures alike; (a) falls back to perf script on a
#       shard native cannot read, and says so in the line it prints).
#   (d) the same two with --inline: --symbolizer native --inline against
#       --symbolizer perf --inline (inline frames; docs/native-symbolizer.md).
# Prints the wall times (best of --runs), the ratios, whether the folded
# totals are identical, and each side's peak RSS (/usr/bin/time; for (b) the
# largest of its steps); --no-old skips (b). Then the symbol agreement: the share of sample
# weight on identical stacks between (a) and the ground truth, `perf script`
# run on the raw shards without --symfs on this machine (the worker binary
# still in place), folded by `jobprof fold`: what perf names on the node,
# kernel frames included (docs/symbols.md).
#
#   bash benches/process.sh [--shards 3] [--threads 6] [--seconds 10]
#        [--frequency 999] [--call-graph fp|dwarf,SIZE] [--depth 60] [--runs 3]
#        [--keep DIR] [--no-old]
# --depth runs every query of the workload under that many extra frames: real
# servers have deep stacks, and perf script's cost grows with them.
# A >= 500 MB dwarf capture (each sample carries a 16 KiB stack copy):
#   bash benches/process.sh --call-graph dwarf,16384 --seconds 100 --no-old \
#        --keep /tmp/bench-dwarf
# (--keep reuses the capture on the next run with the same DIR).
#
# Needs perf, gcc, /usr/bin/time; installs inferno 0.12.8 with cargo when
# inferno-collapse-perf is missing. Builds jobprof in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

shards=3 threads=6 seconds=20 freq=999 call_graph=fp depth=60 runs=3 keep= old=1
while [ $# -gt 0 ]; do
  case "$1" in
    --shards) shards=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --frequency) freq=$2; shift 2 ;;
    --call-graph) call_graph=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --no-old) old=0; shift ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    *) echo "process.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

for tool in perf gcc /usr/bin/time gzip; do
  command -v "$tool" >/dev/null || { echo "process.sh: $tool is required" >&2; exit 1; }
done
if [ "$old" = 1 ] && { ! command -v inferno-collapse-perf >/dev/null || ! command -v inferno-flamegraph >/dev/null; }; then
  cargo install inferno --locked --version 0.12.8
fi

cargo build --release --locked --quiet -p jobprof -p jobprof-record
bin=$(release_dir .)
jobprof=$bin/jobprof
recorder=$bin/jobprof-record

if [ -n "$keep" ]; then work=$keep; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
result=$work/result_dir
capture=$result/profiles/perf/worker_0/bench
symfs=$result/profiles/perf/worker_0/symfs

if [ ! -d "$capture" ]; then
  gcc -O2 -g -fno-omit-frame-pointer -pthread -o "$work/demo_worker" fixtures/src/demo_worker.c
  "$work/demo_worker" $((seconds + 60)) "$threads" "$depth" >/dev/null &
  worker=$!
  sleep 0.3
  mkdir -p "$result/profiles/perf"
  if [ -x "$recorder" ]; then
    # The real capture sidecar, driven as a job drives it.
    tokens=$work/tokens; mkdir -p "$tokens"
    per=$(( (threads + 1 + shards - 1) / shards ))   # worker threads + main thread
    SLURM_JOB_ID=bench "$recorder" sidecar --token-dir "$tokens" --worker 0 --pid "$worker" \
      --out "$result/profiles/perf" --staging "$work/staging" --frequency "$freq" \
      --call-graph "$call_graph" --threads-per-shard "$per" > "$work/sidecar.log" 2>&1 &
    sidecar=$!
    for _ in $(seq 600); do [ -e "$tokens/.perf_sidecar_ready_w0" ] && break; sleep 0.1; done
    "$recorder" start --token-dir "$tokens" --worker 0 --query bench
    sleep "$seconds"
    "$recorder" stop --token-dir "$tokens" --worker 0 --query bench
    "$recorder" shutdown --token-dir "$tokens" --worker 0 >/dev/null
    wait "$sidecar"
  else
    bash scripts/perf-capture.sh --pid "$worker" --out "$result/profiles/perf" --worker 0 \
      --query bench --shards "$shards" --seconds "$seconds" --frequency "$freq" \
      --call-graph "$call_graph" --job-id bench >/dev/null
  fi
  kill "$worker" 2>/dev/null || true
  wait "$worker" 2>/dev/null || true
fi
data=$(cd "$capture" && ls perf.data* | sort)
echo "capture: $capture"
echo "shards: $(echo "$data" | wc -l), perf.data total $(du -cb $(printf "$capture/%s " $data) | tail -1 | cut -f1) bytes, call graph $call_graph, $(nproc) cores"

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
peak() { awk '/Maximum resident/ {print $NF}' "$1"; }
# CPU seconds (user + system, children included): on a shared machine
# wall times swing with the load, CPU time much less.
cpu() { awk '/User time/ {u = $NF} /System time/ {s = $NF} END {printf "%.2f\n", u + s}' "$1"; }

run_new() {
  local t0 log=$work/new.time
  t0=$(date +%s%N)
  /usr/bin/time -v "$jobprof" process --force --symbolizer native "$result" >/dev/null 2>"$log"
  new_ms=$(ms "$t0")
  new_rss=$(peak "$log")
  new_cpu=$(cpu "$log")
  from=$(grep -o '"symbolized_from": "[^"]*"' "$capture/summary.json" | cut -d'"' -f4)
}

run_perf() {
  local t0 log=$work/perf.time
  t0=$(date +%s%N)
  /usr/bin/time -v "$jobprof" process --force --symbolizer perf "$result" >/dev/null 2>"$log"
  perf_ms=$(ms "$t0")
  perf_rss=$(peak "$log")
  perf_cpu=$(cpu "$log")
  perf_total=$(awk '{s += $NF} END {printf "%.0f\n", s}' "$capture/stacks.folded")
}

# (d): native and perf script with --inline; sets inl_{new,perf}_{ms,rss,cpu}.
run_inline() {
  local who=$1 t0 log=$work/inline-$1.time
  t0=$(date +%s%N)
  /usr/bin/time -v "$jobprof" process --force --inline --symbolizer "$who" "$result" >/dev/null 2>"$log"
  eval "inl_${who}_ms=$(ms "$t0") inl_${who}_rss=$(peak "$log") inl_${who}_cpu=$(cpu "$log")"
  if [ "$who" = native ]; then
    inl_from=$(grep -o '"symbolized_from": "[^"]*"' "$capture/summary.json" | cut -d'"' -f4)
    inl_native_total=$(awk '{s += $NF} END {printf "%.0f\n", s}' "$capture/stacks.folded")
  else
    inl_perf_total=$(awk '{s += $NF} END {printf "%.0f\n", s}' "$capture/stacks.folded")
  fi
}

# Keeps the smallest of variable $1 (a number) in variable $2.
keep_min() {
  if [ -z "${!2}" ] || awk -v a="${!1}" -v b="${!2}" 'BEGIN {exit !(a < b)}'; then
    printf -v "$2" '%s' "${!1}"
    [ -n "${3:-}" ] && printf -v "$3" '%s' "${!4}"
  fi
  return 0
}

run_old() {
  local t0 out=$work/old rss=0 r
  rm -rf "$out"; mkdir -p "$out"
  t0=$(date +%s%N)
  : > "$out/perf.script"
  for f in $data; do
    /usr/bin/time -v -o "$out/t.script" perf script -f -i "$capture/$f" --symfs "$symfs" --no-inline \
      >> "$out/perf.script" 2>/dev/null
    r=$(peak "$out/t.script"); [ "$r" -gt "$rss" ] && rss=$r
  done
  /usr/bin/time -v -o "$out/t.collapse" inferno-collapse-perf "$out/perf.script" > "$out/stacks.folded"
  r=$(peak "$out/t.collapse"); [ "$r" -gt "$rss" ] && rss=$r
  /usr/bin/time -v -o "$out/t.fg" inferno-flamegraph "$out/stacks.folded" > "$out/flamegraph.svg"
  r=$(peak "$out/t.fg"); [ "$r" -gt "$rss" ] && rss=$r
  /usr/bin/time -v -o "$out/t.gzip" gzip -1 -k "$out/perf.script"
  r=$(peak "$out/t.gzip"); [ "$r" -gt "$rss" ] && rss=$r
  old_ms=$(ms "$t0")
  old_rss=$rss
}

best_new= best_old= best_perf= best_new_cpu= best_perf_cpu=
best_inl_native= best_inl_perf= best_inl_native_cpu= best_inl_perf_cpu= best_inl_native_rss= best_inl_perf_rss=
for ((i = 1; i <= runs; i++)); do
  # The --inline pair first: the plain native run leaves the outputs the
  # checks below read.
  run_inline perf
  run_inline native
  if [ "$old" = 1 ]; then run_old; else old_ms=0 old_rss=0; fi
  run_perf
  run_new
  echo "run $i: jobprof process native ${new_ms} ms, ${new_cpu} s CPU (peak RSS ${new_rss} KB; $from) | --symbolizer perf ${perf_ms} ms, ${perf_cpu} s CPU (peak RSS ${perf_rss} KB) | old way ${old_ms} ms (peak RSS ${old_rss} KB)"
  echo "run $i --inline: native ${inl_native_ms} ms, ${inl_native_cpu} s CPU (peak RSS ${inl_native_rss} KB; $inl_from) | --symbolizer perf ${inl_perf_ms} ms, ${inl_perf_cpu} s CPU (peak RSS ${inl_perf_rss} KB)"
  keep_min inl_native_ms best_inl_native best_inl_native_rss inl_native_rss
  keep_min inl_perf_ms best_inl_perf best_inl_perf_rss inl_perf_rss
  keep_min inl_native_cpu best_inl_native_cpu
  keep_min inl_perf_cpu best_inl_perf_cpu
  if [ -z "$best_new" ] || [ "$new_ms" -lt "$best_new" ]; then best_new=$new_ms; best_new_rss=$new_rss; fi
  if [ -z "$best_perf" ] || [ "$perf_ms" -lt "$best_perf" ]; then best_perf=$perf_ms; best_perf_rss=$perf_rss; fi
  if [ -z "$best_new_cpu" ] || awk -v a="$new_cpu" -v b="$best_new_cpu" 'BEGIN {exit !(a < b)}'; then best_new_cpu=$new_cpu; fi
  if [ -z "$best_perf_cpu" ] || awk -v a="$perf_cpu" -v b="$best_perf_cpu" 'BEGIN {exit !(a < b)}'; then best_perf_cpu=$perf_cpu; fi
  if [ -z "$best_old" ] || [ "$old_ms" -lt "$best_old" ]; then best_old=$old_ms; best_old_rss=$old_rss; fi
done

sum() { awk '{s += $NF} END {printf "%.0f\n", s}' "$1"; }
new_total=$(sum "$capture/stacks.folded")
old_total=0; [ "$old" = 1 ] && old_total=$(sum "$work/old/stacks.folded")
samples=$(grep -o '"samples": [0-9]*' "$capture/summary.json" | head -1 | grep -o '[0-9]*$')
echo
echo "perf.script.zst: $(stat -c %s "$capture/perf.script.zst") bytes, $samples samples"
echo "(a) jobprof process --force --symbolizer native ($from): best ${best_new} ms, ${best_new_cpu} s CPU, peak RSS ${best_new_rss} KB"
echo "(c) jobprof process --force --symbolizer perf: best ${best_perf} ms, ${best_perf_cpu} s CPU, peak RSS ${best_perf_rss} KB"
awk -v a="$best_new" -v c="$best_perf" 'BEGIN { printf "native speedup (c)/(a), wall: %.2fx (target >= 5x)\n", c / a }'
awk -v a="$best_new_cpu" -v c="$best_perf_cpu" 'BEGIN { if (a > 0) printf "native speedup (c)/(a), CPU: %.2fx\n", c / a }'
echo "(d) --inline: native ($inl_from) best ${best_inl_native} ms, ${best_inl_native_cpu} s CPU, peak RSS ${best_inl_native_rss} KB; perf script best ${best_inl_perf} ms, ${best_inl_perf_cpu} s CPU, peak RSS ${best_inl_perf_rss} KB"
awk -v a="$best_inl_native" -v c="$best_inl_perf" 'BEGIN { printf "native speedup with --inline, wall: %.2fx (target >= 5x)\n", c / a }'
awk -v a="$best_inl_native_cpu" -v c="$best_inl_perf_cpu" 'BEGIN { if (a > 0) printf "native speedup with --inline, CPU: %.2fx\n", c / a }'
if [ "$inl_native_total" != "$inl_perf_total" ]; then
  echo "--inline folded totals DIFFER: native $inl_native_total, perf script $inl_perf_total" >&2
  exit 1
fi
if [ "$new_total" != "$perf_total" ]; then
  echo "folded totals DIFFER: native $new_total, perf script $perf_total" >&2
  exit 1
fi
for f in $data; do perf script -f -i "$capture/$f" --no-inline 2>/dev/null; done > "$work/reference.txt"
"$jobprof" fold "$work/reference.txt" -o "$work/reference.folded"
# Like for like: the reference has no inline frames, and the runs above
# left a --inline run's stacks (where an inline record names an aliased
# assembler function, e.g. __memcpy_ for __memmove_, as perf --inline
# does too).
"$jobprof" process --force --no-inline --symbolizer native "$result" >/dev/null 2>&1
awk '
  { n = $NF; k = substr($0, 1, length($0) - length(n) - 1) }
  NR == FNR { ref[k] += n; next }
  { ours += n; same += (n < ref[k] ? n : ref[k]) }
  END { printf "symbol agreement with perf script on the raw shards (no --symfs), both --no-inline: %.2f%% of the sample weight on identical stacks\n", 100 * same / ours }
' "$work/reference.folded" "$capture/stacks.folded"
[ "$old" = 1 ] || exit 0
echo "(b) perf script x$(echo "$data" | wc -l) + inferno + gzip -1: best ${best_old} ms, peak RSS ${best_old_rss} KB"
awk -v a="$best_new" -v b="$best_old" 'BEGIN { printf "speedup (b)/(a): %.2fx (target >= 1.8x on 2 cores)\n", b / a }'
if [ "$new_total" = "$old_total" ]; then
  echo "folded totals identical: $new_total"
else
  echo "folded totals DIFFER: jobprof $new_total, inferno $old_total" >&2
  exit 1
fi
