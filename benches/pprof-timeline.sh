#!/usr/bin/env bash
# Measures the pprof writer and the flamegraph page's timeline on a big
# synthetic capture: the demo capture's real samples repeated to SIZE_MB of
# perf script text over THREADS threads and STACKS distinct leaf frames
# (benches/gen-big-script.py), in a capture directory with no perf.data (so
# `jobprof process` folds the capture's own perf.script.zst). Prints peak
# RSS and time of `process --formats folded,pprof` and of
# `--formats folded,html`, the sizes written, and the page's load figures in
# headless Chromium (when the selection's flamegraph is drawn, and how long
# that draw took, from the page's data-jp-tl-* attributes).
#
#   bash benches/pprof-timeline.sh [SIZE_MB] [THREADS] [STACKS]
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-200}
threads=${2:-4000}
stacks=${3:-100000}
jobprof=${JOBPROF:-target/release/jobprof}
[ -x "$jobprof" ] || jobprof=target/x86_64-unknown-linux-gnu/release/jobprof
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r fixtures/result_dir_demo "$work/r"
cap="$work/r/profiles/perf/worker_0/q01"
rm -f "$cap"/perf.data.part* "$cap"/perf.script.zst
zstd -dc fixtures/result_dir_demo/profiles/perf/worker_0/q01/perf.script.zst \
  | python3 benches/gen-big-script.py "$size" "$threads" "$stacks" \
  | zstd -q -T2 -3 -o "$cap/perf.script.zst"
echo "input: $(du -h "$cap/perf.script.zst" | cut -f1) zstd, ${size} MiB of text, $threads threads"
run() {
  /usr/bin/time -f "%M KiB peak RSS, %e s" "$jobprof" process "$cap" --force --formats "$1" \
    2>&1 >/dev/null | tail -1
}
echo "folded only:    $(run folded)"
echo "folded,pprof:   $(run folded,pprof)"
echo "profile.pb.gz:  $(du -h "$cap/profile.pb.gz" | cut -f1)"
echo "folded,html:    $(run folded,html)"
echo "flamegraph.html: $(du -h "$cap/flamegraph.html" | cut -f1)"
echo "distinct stacks: $(wc -l < "$cap/stacks.folded")"
if command -v chromium >/dev/null; then
  for frag in "" "#t=1000-3000"; do
    prof=$(mktemp -d)
    start=$(date +%s.%N)
    dom=$(chromium --headless --no-sandbox --disable-gpu --no-first-run \
      --user-data-dir="$prof" --virtual-time-budget=60000 --dump-dom \
      "file://$cap/flamegraph.html$frag" 2>/dev/null)
    end=$(date +%s.%N)
    rm -rf "$prof"
    ready=$(grep -o 'data-jp-tl-ready-ms="[0-9]*"' <<<"$dom" | grep -o '[0-9]*' || echo "?")
    draw=$(grep -o 'data-jp-tl-draw-ms="[0-9]*"' <<<"$dom" | grep -o '[0-9]*' || echo "?")
    printf 'chromium %-14s timeline drawn at %s ms after navigation (draw %s ms); chromium run %.1f s\n' \
      "${frag:-(no selection)}" "$ready" "$draw" "$(echo "$end - $start" | bc)"
  done
fi
