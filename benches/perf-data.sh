#!/usr/bin/env bash
# A plain perf.data: `jobprof process perf.data` (and `jobprof fold
# perf.data`) against `perf script -i perf.data | jobprof fold` on the same
# file, median of 3 wall times each (issue 49, item 1).
#
#   bash benches/perf-data.sh FILE...        # perf.data files to time
#   bash benches/perf-data.sh --record       # records the libc worker first:
#                                            # fp.data (perf record -g, 15 s, 999 Hz)
#                                            # and dwarf.data (--call-graph dwarf, 8 s, 499 Hz)
#
# When `samply` (0.13.1: `cargo install samply`) is on the PATH, or SAMPLY
# names it, its import of the same file is timed too, twice: `--save-only`
# (reads and unwinds; names nothing, its server looks symbols up later) and
# with `--unstable-presymbolicate` (names written beside the profile, so the
# work compares with jobprof's, which names every frame).
#
# JOBPROF=path/to/jobprof (default: target/<host>/release/jobprof). Outputs
# go to FILE.bench/ (the inputs are not modified). The symbol cache is
# whatever ~/.cache/jobprof holds (warm after the first run).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
J=${JOBPROF:-$(ls "$here"/target/*/release/jobprof | head -1)}
if [[ ${1:-} == --record ]]; then
    work=$(mktemp -d)
    gcc -O2 -g -fno-omit-frame-pointer -pthread "$here/tests/programs/libc_worker.c" -o "$work/libc_worker"
    "$work/libc_worker" 3 >/dev/null &
    pid=$!
    sleep 0.5
    perf record -q -g -F 999 -o "$work/fp.data" -p "$pid" -- sleep 15 >/dev/null 2>&1
    perf record -q --call-graph dwarf -F 499 -o "$work/dwarf.data" -p "$pid" -- sleep 8 >/dev/null 2>&1
    kill "$pid"
    set -- "$work/fp.data" "$work/dwarf.data"
fi
median3() {
    local ts=() s e
    for _ in 1 2 3; do
        s=$(date +%s.%N)
        bash -c "$1" >/dev/null 2>&1
        e=$(date +%s.%N)
        ts+=("$(echo "$e - $s" | bc)")
    done
    printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p
}
S=${SAMPLY:-$(command -v samply || true)}
for f in "$@"; do
    out="$f.bench"
    mkdir -p "$out"
    echo "$f ($(stat -c %s "$f") bytes)"
    cmds=("$J process $f -o $out/process --force -q"
          "$J fold $f -o $out/fold.folded"
          "perf script -i $f | $J fold -o $out/script.folded")
    if [[ -n $S ]]; then
        cmds+=("$S import --save-only -o $out/samply.json.gz $f"
               "$S import --save-only --unstable-presymbolicate -o $out/samply-syms.json.gz $f")
    fi
    for cmd in "${cmds[@]}"; do
        printf '  %6.3f s  %s\n' "$(median3 "$cmd")" "$cmd"
    done
done
[[ -n $S ]] && echo "samply: $("$S" --version)"

echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, $(perf --version)"
