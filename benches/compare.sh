#!/usr/bin/env bash
# Side-by-side benchmark: `jobprof fold` against `inferno-collapse-perf` on a
# large real `perf script` text, in the same run, with warm page cache.
#
# Usage: bash benches/compare.sh [INPUT]
#
#   INPUT     perf script text to fold. Default: $BIG_INPUT (default
#             /tmp/jobprof-big.perf.txt), built with benches/make-big-input.sh
#             (1.4 GB of real captures) when missing.
#
# Environment:
#   JOBPROF=PATH   jobprof binary to time (default: build with
#                  `cargo build --release` and use
#                  target/<host triple>/release/jobprof).
#   INFERNO=PATH   inferno-collapse-perf binary (default: from PATH or
#                  ~/.cargo/bin; installed with
#                  `cargo install inferno --locked --version 0.12.8` if missing).
#   JOBPROF_BEFORE=PATH  a second jobprof binary (an older build) timed in
#                  the same rounds, `fold -j 1` and `fold`, for a before/after
#                  comparison side by side (rows and ratios marked "before").
#   RUNS=N         rounds; every tool runs once per round, the median is
#                  reported (default 3).
#   BIG_INPUT=PATH where the default input is built/cached.
#   BIG_GB=X       size of the default input in GB (default 1.4).
#   FROM_FIXTURES=1 build the default input from the committed fixtures
#                  (make-big-input.sh --from-fixtures; default BIG_INPUT
#                  /tmp/jobprof-big-fixtures.perf.txt) instead of fresh
#                  recordings.
#   SKIP_DOUBLE=1  skip the doubled-input memory check (it needs a 2x copy of
#                  INPUT on disk, cached as INPUT.x2).
#
# Measures wall time (date +%s%N around each run) and peak RSS with
# `/usr/bin/time -f '%M'` (GNU time, installed with apt-get when missing).
# Each folder writes its collapsed stacks to a file in a scratch directory
# (the same cost for every tool); the table shows the sum of the counts each
# one produced, as a sanity check (jobprof's default mode also counts the
# header-only samples that inferno drops).
# Prints a Markdown table (paste it into the README) with MB/s (of the median
# and of the fastest run: on a shared machine the fastest is the least
# disturbed), CPU seconds
# (user + system; less disturbed than wall time when the machine is busy) and
# peak RSS,
# the throughput ratios jobprof (all cores) vs the best inferno and jobprof -j 1
# vs inferno -n 1, the peak RSS of jobprof on INPUT and on INPUT doubled, and
# `cat` / `wc -l` as the reference for the scan limit.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/benches/lib.sh"
runs=${RUNS:-3}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
if [ $# -gt 1 ]; then
    usage >&2
    exit 2
fi
if [ $# -eq 1 ]; then
    input=$1
    [ -r "$input" ] || { echo "compare: cannot read $input" >&2; exit 2; }
else
    if [ "${FROM_FIXTURES:-0}" = 1 ]; then
        input=${BIG_INPUT:-/tmp/jobprof-big-fixtures.perf.txt}
        bash "$root/benches/make-big-input.sh" --from-fixtures "$input" "${BIG_GB:-1.4}"
    else
        input=${BIG_INPUT:-/tmp/jobprof-big.perf.txt}
        bash "$root/benches/make-big-input.sh" "$input" "${BIG_GB:-1.4}"
    fi
fi
input=$(realpath "$input")
bytes=$(stat -c %s "$input")

if [ ! -x /usr/bin/time ]; then
    echo "compare: installing GNU time" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time
fi

if [ -z "${JOBPROF:-}" ]; then
    (cd "$root" && cargo build --release --quiet)
    JOBPROF=$(release_dir "$root")/jobprof
fi
[ -x "$JOBPROF" ] || { echo "compare: $JOBPROF is not an executable" >&2; exit 2; }

if [ -z "${INFERNO:-}" ]; then
    INFERNO=$(command -v inferno-collapse-perf || true)
    [ -n "$INFERNO" ] || [ ! -x "$HOME/.cargo/bin/inferno-collapse-perf" ] || INFERNO=$HOME/.cargo/bin/inferno-collapse-perf
    if [ -z "$INFERNO" ]; then
        echo "compare: installing inferno-collapse-perf 0.12.8" >&2
        cargo install inferno --locked --version 0.12.8 --quiet
        INFERNO=$HOME/.cargo/bin/inferno-collapse-perf
    fi
fi
[ -x "$INFERNO" ] || { echo "compare: $INFERNO is not an executable" >&2; exit 2; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/jobprof-compare.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# warm: read the file twice so that every tool reads from the page cache.
warm() { cat "$1" >/dev/null; cat "$1" >/dev/null; }

# once NAME CMD...: runs CMD once (stdout to $scratch/NAME.out, or to
# $MEASURE_OUT when set) and appends "wall_s peak_rss_kb cpu_s" to
# $scratch/NAME.runs; after a failure NAME is not run again and its result
# is "fail RC".
once() {
    local name=$1 rc=0 t0 t1
    shift
    [ ! -e "$scratch/$name.failed" ] || return 0
    t0=$(date +%s%N)
    /usr/bin/time -f '%M %U %S' -o "$scratch/$name.time" "$@" >"${MEASURE_OUT:-$scratch/$name.out}" 2>"$scratch/$name.err" || rc=$?
    t1=$(date +%s%N)
    if [ "$rc" != 0 ]; then
        echo "fail $rc" >"$scratch/$name.failed"
        echo "compare: $name failed (exit $rc): $(tail -n 3 "$scratch/$name.err")" >&2
        return 0
    fi
    # Wall time from date(1) in ns (time's %e has only 10 ms resolution);
    # peak RSS (KB) and user+system CPU seconds from time.
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }') $(tail -n 1 "$scratch/$name.time" | awk '{ printf "%s %.2f", $1, $2 + $3 }')" >>"$scratch/$name.runs"
}

# settle NAME: the median run (by wall time) goes to $scratch/NAME.res, the
# fastest to $scratch/NAME.best.
settle() {
    local name=$1 n
    if [ -e "$scratch/$name.failed" ]; then
        cp "$scratch/$name.failed" "$scratch/$name.res"
        cp "$scratch/$name.failed" "$scratch/$name.best"
        return
    fi
    n=$(wc -l <"$scratch/$name.runs")
    sort -n "$scratch/$name.runs" | sed -n "$(((n + 1) / 2))p" >"$scratch/$name.res"
    sort -n "$scratch/$name.runs" | head -n 1 >"$scratch/$name.best"
    echo "compare: $name: $(tr '\n' ',' <"$scratch/$name.runs" | sed 's/,$//') (wall s, peak KB, CPU s)" >&2
}

# total NAME: sum of the sample counts in NAME's collapsed output.
total() { awk '{ s += $NF } END { printf "%.0f", s }' "$scratch/$1.out" 2>/dev/null || echo "-"; }

double=
if [ -z "${SKIP_DOUBLE:-}" ]; then
    double=$input.x2
    if [ ! -f "$double" ] || [ "$(stat -c %s "$double")" != $((2 * bytes)) ]; then
        echo "compare: writing $double" >&2
        cat "$input" "$input" >"$double.tmp" && mv "$double.tmp" "$double"
    fi
fi

echo "compare: input $input ($bytes bytes), $runs rounds, $(nproc) cores" >&2
load_before=$(cut -d' ' -f1 /proc/loadavg)
warm "$input"
[ -z "$double" ] || warm "$double"
tools=(cat wc jobprof-1 jobprof-all inferno-n1 inferno-n2)
[ -z "$double" ] || tools+=(jobprof-all-x2)
[ -z "${JOBPROF_BEFORE:-}" ] || tools+=(before-1 before-all)
for name in "${tools[@]}"; do : >"$scratch/$name.runs"; done
# Rounds: every tool runs once per round, so that load from other processes,
# if any, spreads over all tools alike.
for ((round = 1; round <= runs; round++)); do
    echo "compare: round $round of $runs" >&2
    MEASURE_OUT=/dev/null once cat cat "$input"
    once wc wc -l "$input"
    once jobprof-1 "$JOBPROF" fold -j 1 "$input"
    once jobprof-all "$JOBPROF" fold "$input"
    once inferno-n1 "$INFERNO" -q -n 1 "$input"
    once inferno-n2 "$INFERNO" -q -n 2 "$input"
    [ -z "$double" ] || once jobprof-all-x2 "$JOBPROF" fold "$double"
    if [ -n "${JOBPROF_BEFORE:-}" ]; then
        once before-1 "$JOBPROF_BEFORE" fold -j 1 "$input"
        once before-all "$JOBPROF_BEFORE" fold "$input"
    fi
done
for name in "${tools[@]}"; do settle "$name"; done

wall() { cut -d' ' -f1 "$scratch/$1.res"; }
best() { cut -d' ' -f1 "$scratch/$1.best"; }
rss() { cut -d' ' -f2 "$scratch/$1.res"; }
ok() { [ "$(cut -d' ' -f1 "$scratch/$1.res")" != fail ]; }
mbps() { awk -v b="$2" -v t="$(wall "$1")" 'BEGIN { if (t > 0) printf "%.0f", b / 1e6 / t; else printf "inf" }'; }
best_mbps() { awk -v b="$2" -v t="$(best "$1")" 'BEGIN { if (t > 0) printf "%.0f", b / 1e6 / t; else printf "inf" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; }

load_after=$(cut -d' ' -f1 /proc/loadavg)
model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo
echo "Machine: $(nproc) cores ($model), $(awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo) RAM, Linux $(uname -r)"
echo "Input: $input, $(awk -v b="$bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }'), page cache warm; median of $runs runs"
echo "Load average (1 min): $load_before before, $load_after after"
if awk -v a="$load_before" -v b="$load_after" -v n="$(nproc)" 'BEGIN { exit !(a > n / 2 || b > n + 0.5) }'; then
    echo "WARNING: other processes were busy during the run; figures are not representative."
fi
echo
echo "| tool | threads | wall s (median) | MB/s (median) | MB/s (best) | CPU s | peak RSS MB | samples counted |"
echo "|---|---|---|---|---|---|---|---|"
row() { # row NAME LABEL THREADS BYTES
    if ok "$1"; then
        printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$3" "$(wall "$1")" "$(mbps "$1" "$4")" "$(best_mbps "$1" "$4")" "$(cut -d' ' -f3 "$scratch/$1.res")" \
            "$(awk -v k="$(rss "$1")" 'BEGIN { printf "%.0f", k / 1024 }')" "$5"
    else
        printf '| %s | %s | failed (exit %s) | - | - | - | - | - |\n' "$2" "$3" "$(cut -d' ' -f2 "$scratch/$1.res")"
    fi
}
row cat '`cat`' 1 "$bytes" -
row wc '`wc -l`' 1 "$bytes" -
row jobprof-1 '`jobprof fold -j 1`' 1 "$bytes" "$(total jobprof-1)"
row jobprof-all '`jobprof fold`' "$(nproc)" "$bytes" "$(total jobprof-all)"
row inferno-n1 '`inferno-collapse-perf -n 1`' 1 "$bytes" "$(total inferno-n1)"
row inferno-n2 '`inferno-collapse-perf -n 2`' 2 "$bytes" "$(total inferno-n2)"
[ -z "$double" ] || row jobprof-all-x2 '`jobprof fold` on input x2' "$(nproc)" "$((2 * bytes))" "$(total jobprof-all-x2)"
if [ -n "${JOBPROF_BEFORE:-}" ]; then
    row before-1 '`jobprof fold -j 1` (before)' 1 "$bytes" "$(total before-1)"
    row before-all '`jobprof fold` (before)' "$(nproc)" "$bytes" "$(total before-all)"
fi
echo

best_inferno=
for n in inferno-n1 inferno-n2; do
    if ok "$n"; then
        if [ -z "$best_inferno" ] || awk -v a="$(wall "$n")" -v b="$(wall "$best_inferno")" 'BEGIN { exit !(a < b) }'; then
            best_inferno=$n
        fi
    fi
done
if [ -n "$best_inferno" ] && ok jobprof-all; then
    echo "jobprof fold (all cores) vs best inferno ($best_inferno): $(ratio "$(wall "$best_inferno")" "$(wall jobprof-all)") throughput by medians, $(ratio "$(best "$best_inferno")" "$(best jobprof-all)") by best runs (target >= 5x)"
fi
if ok inferno-n1 && ok jobprof-1; then
    echo "jobprof fold -j 1 vs inferno -n 1: $(ratio "$(wall inferno-n1)" "$(wall jobprof-1)") throughput by medians, $(ratio "$(best inferno-n1)" "$(best jobprof-1)") by best runs (target >= 4x)"
fi
for b in ${JOBPROF_BEFORE:+1 all}; do
    if ok "before-$b" && ok "jobprof-$b"; then
        echo "jobprof fold ($b) after vs before: $(ratio "$(wall "before-$b")" "$(wall "jobprof-$b")") throughput by medians, $(ratio "$(best "before-$b")" "$(best "jobprof-$b")") by best runs"
    fi
    if ok "before-$b" && [ "$b" = all ] && [ -n "$best_inferno" ]; then
        echo "jobprof fold (all cores, before) vs best inferno: $(ratio "$(wall "$best_inferno")" "$(wall before-all)") by medians"
    fi
done
if ok jobprof-1 && ok wc; then
    echo "jobprof fold -j 1 runs at $(awk -v a="$(best wc)" -v b="$(best jobprof-1)" 'BEGIN { printf "%.0f%%", a * 100 / b }') of the \`wc -l\` scan rate (one core, best runs)"
fi
if ok jobprof-all; then
    echo "jobprof peak RSS: $(awk -v k="$(rss jobprof-all)" 'BEGIN { printf "%.0f MB", k / 1024 }') on $(awk -v b="$bytes" 'BEGIN { printf "%.2f GB", b / 1e9 }') (target <= 200 MB)"
    if [ -n "$double" ] && ok jobprof-all-x2; then
        echo "jobprof peak RSS on the input doubled: $(awk -v k="$(rss jobprof-all-x2)" 'BEGIN { printf "%.0f MB", k / 1024 }'), growth $(awk -v a="$(rss jobprof-all)" -v b="$(rss jobprof-all-x2)" 'BEGIN { printf "%+.1f%%", (b - a) * 100 / a }') (target <= +25%)"
    fi
fi
