#!/usr/bin/env bash
# Regenerates the screenshots in docs/ from the pages the current build
# writes, in headless Chromium (the flags tests/util.rs uses: no sandbox,
# no GPU, no network):
#
#   docs/job-index-screenshot.png  the job page of a real job: 2 workers x 3
#                                  queries of tests/programs/job_queries.c,
#                                  each worker recorded by its own
#                                  jobprof-record sidecar (as tests/job.rs
#                                  does), sorted by samples
#   docs/job-diff-screenshot.png   the index of `jobprof diff` of that run
#                                  and a second one whose q02 does twice
#                                  the work
#   docs/timeline-screenshot.png   the demo capture's page at #t=500-1500
#   docs/functions-screenshot.png  the same page with demo_merge_sort picked
#                                  in the function table (?fn=)
#   docs/render-screenshot.png     `jobprof render` of a real `perf record -e
#                                  cpu-clock -g` of `xz -T2 | gzip | sort`
#
# Run as root from anywhere (perf, gcc, chromium, xz; a built workspace):
#   cargo build -p jobprof -p jobprof-record && bash scripts/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/$(rustc -vV | sed -n 's/^host: //p')/debug
[ -x "$bin/jobprof-record" ] || bin=target/debug
jobprof=$PWD/$bin/jobprof
rec=$PWD/$bin/jobprof-record
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome) || {
  echo "no chromium (apt-get install -y chromium)" >&2
  exit 1
}

work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# shot PAGE_URL OUT.png WIDTH HEIGHT
shot() {
  "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --host-resolver-rules='MAP * ~NOTFOUND' --hide-scrollbars \
    --user-data-dir="$work/chromium" --virtual-time-budget=5000 \
    --allow-file-access-from-files \
    --window-size="$3,$4" --screenshot="$2" "$1" 2> /dev/null
  echo "$2"
}

# wait_for FILE: up to 300 s.
wait_for() {
  for _ in $(seq 3000); do [ -e "$1" ] && return; sleep 0.1; done
  echo "timed out waiting for $1" >&2
  exit 1
}

# worker RESULT_DIR JOB W "UNITS_Q01 UNITS_Q02 UNITS_Q03": one worker of a
# job, its sidecar, and the driver's start/stop per query.
worker() {
  local perf=$1/profiles/perf w=$3 i=0 units phase
  local cue=$work/cue$2_$w tokens=$work/tokens$2_$w
  mkdir -p "$perf" "$tokens"
  "$work/job_queries" 2 "$cue" &
  local pid=$!
  pids+=("$pid")
  wait_for "$cue.ack"
  SLURM_JOB_ID=$2 "$rec" sidecar --token-dir "$tokens" --worker "$w" --pid "$pid" \
    --out "$perf" --staging "$work/staging$2_$w" --frequency 499 --threads-per-shard 3 \
    > "$work/sidecar$2_$w.log" 2>&1 &
  local sidecar=$!
  wait_for "$tokens/.perf_sidecar_ready_w$w"
  for units in $4; do
    i=$((i + 1))
    phase=$(printf '%s' ABC | cut -c"$i")
    "$rec" start --token-dir "$tokens" --worker "$w" --query "q0$i" --timeout 300
    echo "$i $phase $units" > "$cue"
    until [ "$(cat "$cue.ack" 2> /dev/null)" = "$i" ]; do sleep 0.02; done
    "$rec" stop --token-dir "$tokens" --worker "$w" --query "q0$i" --timeout 300
  done
  "$rec" shutdown --token-dir "$tokens" --worker "$w" --timeout 300 > /dev/null
  wait "$sidecar"
  echo "9 Q 0" > "$cue"
  wait "$pid"
}

# run RESULT_DIR JOB UNITS: a job of 2 workers side by side, processed.
run() {
  worker "$1" "$2" 0 "$3" &
  local a=$!
  worker "$1" "$2" 1 "$3" &
  local b=$!
  wait "$a" "$b"
  "$jobprof" process "$1" -j 2 > /dev/null 2>&1
}

gcc -O1 -fno-omit-frame-pointer -pthread tests/programs/job_queries.c -o "$work/job_queries"
run "$work/a/result_4242" 4242 "150 150 150"
run "$work/b/result_4243" 4243 "150 300 150"
shot "file://$work/a/result_4242/profiles/perf/index.html?sort=-samples" \
  docs/job-index-screenshot.png 1400 900
"$jobprof" diff "$work/a/result_4242" "$work/b/result_4243" -o "$work/diff" > /dev/null
shot "file://$work/diff/index.html" docs/job-diff-screenshot.png 1400 900

cp -a fixtures/result_dir_demo "$work/demo"
"$jobprof" process "$work/demo" --formats folded,html > /dev/null 2>&1
shot "file://$work/demo/profiles/perf/worker_0/q01/flamegraph.html#t=500-1500" \
  docs/timeline-screenshot.png 1400 900
shot "file://$work/demo/profiles/perf/worker_0/q01/flamegraph.html?fn=demo_merge_sort" \
  docs/functions-screenshot.png 1400 900

(cd "$work" && perf record -q -e cpu-clock -F 1999 -g -o perf.data -- \
  sh -c 'head -c 8000000 /dev/urandom | xz -T2 | gzip | sort > /dev/null' 2> /dev/null)
perf script -i "$work/perf.data" 2> /dev/null | "$jobprof" fold -q \
  | "$jobprof" render --count-name ns --title 'xz -T2 | gzip | sort (perf, 1999 Hz)' \
    -o "$work/render.html"
shot "file://$work/render.html" docs/render-screenshot.png 1400 900

# Two pictures from real runs the tests keep, when given (each run takes
# minutes, so they are made once by the tests):
#   JOBPROF_TREND_RUNS=DIR   the DuckDB runs tests/trend.rs keeps with
#                            JOBPROF_TEST_TREND_RUNS=DIR: q1 of an unchanged
#                            run against the run with injected work, 4
#                            replicates a side -> docs/diff-replicates-screenshot.png
#   JOBPROF_SLICES=DIR       the outputs tests/nsys/real_slices.rs keeps with
#                            JOBPROF_TEST_KEEP_SLICES=DIR: the page of slice
#                            q2 of a real nsys report -> docs/nsys-slice-screenshot.png
# A page that scrolls itself (a deep graph opens on its root) is shot in a
# frame of the window's size: headless Chromium's --screenshot paints a
# scrolled page blank.
framed() {
  printf '<!DOCTYPE html><html><body style="margin:0"><iframe src="%s" width="%s" height="%s" style="border:0;display:block"></iframe></body></html>' \
    "$1" "$3" "$4" > "$work/framed.html"
  shot "file://$work/framed.html" "$2" "$3" "$4"
}
if [ -n "${JOBPROF_TREND_RUNS:-}" ]; then
  "$jobprof" diff "$JOBPROF_TREND_RUNS/run_7001" "$JOBPROF_TREND_RUNS/run_7004" --query q1 \
    -o "$work/diff-q1.html" > /dev/null 2>&1
  framed "file://$work/diff-q1.html" docs/diff-replicates-screenshot.png 1400 900
fi
if [ -n "${JOBPROF_SLICES:-}" ]; then
  framed "file://$JOBPROF_SLICES/slices/q2/flamegraph.html" docs/nsys-slice-screenshot.png 1400 900
fi
