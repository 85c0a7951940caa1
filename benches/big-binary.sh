#!/usr/bin/env bash
# One large binary, many captures: what a job of N captures of the same
# big program costs past its first capture, and what the symbol cache
# saves on the next run. The program is this toolchain's rustc, whose
# code is a 150 MB library (librustc_driver, 165,000 symbols), compiling a
# generated crate long enough for N captures of --seconds each, made by the
# real capture sidecar (jobprof-record, --call-graph dwarf at 499 Hz).
# Then, RUNS times each:
#   (1) jobprof process --force --query q01   one capture
#   (N) jobprof process --force               all N captures
# with an empty symbol cache (--cache-dir, emptied first) and with the one
# that run left, and prints the medians, the cost per capture past the
# first, and the store's log line (how many loads for how many captures).
#
#   bash benches/big-binary.sh [--captures 20] [--seconds 0.7] [--runs 3] [--keep DIR]
#
# Needs root (or perf_event_paranoid <= 1), perf, and rustc (rustup's
# toolchain directory is used when rustc is rustup's proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

captures=20 seconds=0.7 runs=3 keep=
while [ $# -gt 0 ]; do
  case "$1" in
    --captures) captures=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "big-binary.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -n "$keep" ]; then work=$keep; mkdir -p "$work"; else work=$(mktemp -d); trap 'rm -rf "$work"' EXIT; fi
bin=$(release_dir .)
cargo build --release --locked --quiet -p jobprof -p jobprof-record
jobprof=$bin/jobprof recorder=$bin/jobprof-record
result=$work/job

# The compiler itself, not rustup's proxy (which would be the process
# attached to).
rustc_bin=$(rustc --print sysroot)/bin/rustc

make_job() {
  local src=$work/big.rs tokens=$work/tokens i rc
  python3 - "$src" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(6000):
        f.write(f"pub fn f{i}(x: &[u64]) -> u64 {{ x.iter().map(|v| v.wrapping_mul({i + 3}) ^ (v >> {i % 13}))"
                f".filter(|v| v % {i % 7 + 2} != 0).fold({i}, |a, b| a.wrapping_add(b)) }}\n")
EOF
  rm -rf "$result" "$tokens" "$work/staging"; mkdir -p "$result/profiles/perf" "$tokens"
  "$rustc_bin" --crate-type=lib -C opt-level=2 -C codegen-units=1 "$src" -o "$work/big.rlib" &
  rc=$!
  sleep 1
  SLURM_JOB_ID=big "$recorder" sidecar --token-dir "$tokens" --worker 0 --pid "$rc" \
    --out "$result/profiles/perf" --staging "$work/staging" --frequency 499 \
    --call-graph dwarf > "$work/sidecar.log" 2>&1 &
  local sidecar=$!
  for _ in $(seq 300); do [ -e "$tokens/.perf_sidecar_ready_w0" ] && break; sleep 0.1; done
  for ((i = 1; i <= captures; i++)); do
    q=$(printf 'q%02d' "$i")
    "$recorder" start --token-dir "$tokens" --worker 0 --query "$q" >/dev/null
    sleep "$seconds"
    "$recorder" stop --token-dir "$tokens" --worker 0 --query "$q" >/dev/null
  done
  "$recorder" shutdown --token-dir "$tokens" --worker 0 >/dev/null
  wait "$sidecar"
  kill "$rc" 2>/dev/null || true
  wait "$rc" 2>/dev/null || true
}
[ -d "$result/profiles/perf/worker_0/q01" ] || make_job
lib=$(find "$result/profiles/perf/worker_0/symfs" -name 'librustc_driver-*.so' | head -1)
echo "job: $result: $(ls -d "$result"/profiles/perf/worker_0/q* | wc -l) captures of rustc; $(basename "$lib") $(du -m "$lib" | cut -f1) MB"

cache_dir=$(bench_cache_dir)
cache=$cache_dir/symbol-cache
if [ -n "$keep" ]; then trap 'rm -rf "$cache_dir"' EXIT; else trap 'rm -rf "$work" "$cache_dir"' EXIT; fi
timed() {
  local t0
  t0=$(date +%s%N)
  "$jobprof" process --force --cache-dir "$cache" "$@" "$result" >/dev/null 2>"$work/jobprof.err"
  ms "$t0"
}
one_cold= one_warm= all_cold= all_warm=
for ((r = 1; r <= runs; r++)); do
  rm -rf "$cache"; one_cold="$one_cold $(timed --query q01)"
  one_warm="$one_warm $(timed --query q01)"
  rm -rf "$cache"; all_cold="$all_cold $(timed)"
  all_warm="$all_warm $(timed)"
done
oc=$(echo "$one_cold" | median) ow=$(echo "$one_warm" | median)
ac=$(echo "$all_cold" | median) aw=$(echo "$all_warm" | median)
grep -h 'symbol store' "$work/jobprof.err" | tail -1 | sed 's/^.*symbol store/last run: symbol store/'
echo "1 capture: median $oc ms with an empty symbol cache, $ow ms warm"
echo "$captures captures: median $ac ms with an empty symbol cache, $aw ms warm"
awk -v n="$captures" -v oc="$oc" -v ac="$ac" -v ow="$ow" -v aw="$aw" 'BEGIN {
  printf "past the first capture: %.1f ms per capture (empty cache), %.1f ms (warm)\n", (ac - oc) / (n - 1), (aw - ow) / (n - 1) }'
