#!/usr/bin/env bash
# `jobprof report FILE` and `jobprof fold FILE` on plain perf.data files,
# two jobprof binaries side by side (runs alternated, the symbol cache
# warmed by one run of each first): median of 5 wall times and of 5 CPU
# times (user + system, from /usr/bin/time: 10 ms steps), per binary.
# CPU time is what to compare on a shared, loaded machine.
#
#   bash benches/perf-data-commands.sh BEFORE_BIN AFTER_BIN FILE...
set -euo pipefail
before=$1 after=$2
shift 2
t=$(mktemp)
trap 'rm -f "$t"' EXIT
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
# Prints "WALL_MS CPU_MS" of one run.
once() {
    /usr/bin/time -f "%e %U %S" -o "$t" "$@" >/dev/null 2>&1
    awk '{printf "%d %d\n", $1 * 1000, ($2 + $3) * 1000}' "$t"
}
for file in "$@"; do
    for cmd in report fold; do
        "$before" "$cmd" "$file" >/dev/null 2>&1 || true
        "$after" "$cmd" "$file" >/dev/null 2>&1 || true
        wb=() cb=() wa=() ca=()
        for _ in 1 2 3 4 5; do
            read -r w c < <(once "$before" "$cmd" "$file")
            wb+=("$w") cb+=("$c")
            read -r w c < <(once "$after" "$cmd" "$file")
            wa+=("$w") ca+=("$c")
        done
        m() { printf '%s\n' "$@" | median; }
        echo "$(basename "$file") $cmd: wall $(m "${wb[@]}") -> $(m "${wa[@]}") ms, CPU $(m "${cb[@]}") -> $(m "${ca[@]}") ms"
    done
done
