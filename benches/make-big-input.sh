#!/usr/bin/env bash
# Build a large, realistic `perf script` text file for benchmarking folders.
#
# Usage: bash benches/make-big-input.sh [--from-fixtures] OUT [SIZE_GB]
#        (SIZE_GB default 1.4)
#
# --from-fixtures: concatenate the committed captures in fixtures/ instead
# (real recordings too, see fixtures/README.md, but small ones: a few
# thousand distinct frames, so every folder's tables stay in cache and the
# figures are higher than on fresh recordings). Needs only zstd. Without it:
#
# Records real workloads with `perf record -e cpu-clock -F 999 -g` (no hardware
# PMU on our machines): `xz -T2`, `sort` of a big file, gcc compiling generated
# C, a Python program, rustc compiling a Rust program (when rustc is installed)
# and a system-wide (`-a`) capture of a mix of them. Each capture is printed
# with `perf script` once; the texts are then concatenated round-robin until
# OUT holds at least SIZE_GB * 10^9 bytes (every capture ends on a sample
# boundary, so the result is valid `perf script` output).
#
# Cached: when OUT exists and OUT.done records the same SIZE_GB and OUT's size,
# nothing is rebuilt. The captures are kept in OUT.parts/ (delete it to record
# afresh). Needs root (for -a and kernel symbols), perf, gcc, xz, python3 and
# coreutils; missing ones are installed with apt-get.
set -euo pipefail

from_fixtures=0
if [ "${1:-}" = --from-fixtures ]; then
    from_fixtures=1
    shift
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 [--from-fixtures] OUT [SIZE_GB]" >&2
    exit 2
fi
out=$(realpath -m "$1")
size_gb=${2:-1.4}
target=$(python3 -c "import sys; print(int(float(sys.argv[1]) * 1e9))" "$size_gb" 2>/dev/null ||
    awk -v g="$size_gb" 'BEGIN { printf "%d\n", g * 1e9 }')
[ "$target" -gt 0 ] || { echo "make-big-input: SIZE_GB must be > 0, got '$size_gb'" >&2; exit 2; }

# What OUT.done records: the size asked for and OUT's size (prefixed with
# "fixtures" for --from-fixtures).
stamp() { echo "${source_tag}$size_gb $(stat -c %s "$1")"; }
source_tag=
[ "$from_fixtures" = 1 ] && source_tag="fixtures "
if [ -f "$out" ] && [ -f "$out.done" ] && [ "$(cat "$out.done")" = "$(stamp "$out")" ]; then
    echo "make-big-input: $out is up to date ($(stat -c %s "$out") bytes)"
    exit 0
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# concat OUT FILE... : FILEs round-robin into OUT until it holds $target bytes.
# Every capture ends on a sample boundary, so the result is valid `perf
# script` output.
concat() {
    local dest=$1
    shift
    local tmp=$dest.tmp have=0
    : >"$tmp"
    while [ "$have" -lt "$target" ]; do
        for c in "$@"; do
            cat "$c" >>"$tmp"
            have=$(stat -c %s "$tmp")
            [ "$have" -ge "$target" ] && break
        done
    done
    mv "$tmp" "$dest"
    stamp "$dest" >"$dest.done"
    echo "make-big-input: wrote $dest ($(stat -c %s "$dest") bytes, $(wc -l <"$dest") lines)"
}

if [ "$from_fixtures" = 1 ]; then
    if ! command -v zstd >/dev/null; then
        echo "make-big-input: installing zstd" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zstd
    fi
    parts=$out.fixtures
    mkdir -p "$parts"
    captures=()
    # mt-fp first: its event (cpu-clock) becomes the default event filter,
    # the event of most of the others.
    for f in mt-fp cxx-fp rust-fp dwarf-inline fields header-only two-events tracepoints gxx-compile system-wide; do
        if [ -f "$here/fixtures/$f.perf.txt" ]; then
            cat "$here/fixtures/$f.perf.txt" >"$parts/$f.perf.txt"
        elif [ -f "$here/fixtures/$f.perf.txt.zst" ]; then
            zstd -dqc "$here/fixtures/$f.perf.txt.zst" >"$parts/$f.perf.txt"
        else
            continue
        fi
        # A blank line after the last sample, so that copies do not run
        # into each other (a one-line-per-sample capture has none).
        echo >>"$parts/$f.perf.txt"
        captures+=("$parts/$f.perf.txt")
    done
    [ ${#captures[@]} -gt 0 ] || { echo "make-big-input: no fixture found in $here/fixtures" >&2; exit 1; }
    concat "$out" "${captures[@]}"
    exit 0
fi

install_missing() {
    local pkgs=()
    command -v perf >/dev/null || pkgs+=(linux-perf)
    command -v gcc >/dev/null || pkgs+=(gcc)
    command -v xz >/dev/null || pkgs+=(xz-utils)
    command -v python3 >/dev/null || pkgs+=(python3)
    if [ ${#pkgs[@]} -gt 0 ]; then
        echo "make-big-input: installing ${pkgs[*]}" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
    fi
}
install_missing

parts=$out.parts
mkdir -p "$parts"
parts=$(cd "$parts" && pwd)

rec() { # rec NAME CMD... : record CMD into NAME.data and print it to NAME.txt
    local name=$1
    shift
    if [ -s "$parts/$name.txt" ]; then
        return
    fi
    echo "make-big-input: recording $name" >&2
    perf record -q -e cpu-clock -F 999 -g -o "$parts/$name.data" -- "$@" >/dev/null
    perf script -i "$parts/$name.data" >"$parts/$name.tmp"
    mv "$parts/$name.tmp" "$parts/$name.txt"
    rm -f "$parts/$name.data"
}

cd "$parts"

# Inputs for the workloads (deterministic, made once).
if [ ! -s words.txt ]; then
    python3 - <<'EOF'
import random
random.seed(42)
alpha = "abcdefghijklmnopqrstuvwxyz"
words = ["".join(random.choices(alpha, k=random.randint(3, 12))) for _ in range(50000)]
with open("words.tmp", "w") as f:
    for i in range(1_500_000):
        f.write(" ".join(random.choices(words, k=random.randint(3, 12))) + "\n")
import os
os.rename("words.tmp", "words.txt")
EOF
fi
if [ ! -s gen.c ]; then
    python3 - <<'EOF'
# A C file with many small functions, loops and switches: gcc -O2 spends
# its time in a realistic mix of passes.
import random
random.seed(1)
out = ["#include <stdint.h>", "#include <string.h>"]
for i in range(1500):
    ops = random.choice(["+", "^", "*", "-"])
    out.append(f"""
static uint64_t helper{i}(uint64_t x, const uint8_t *p, int n) {{
    uint64_t h = {random.randint(1, 1 << 30)}u;
    for (int k = 0; k < n; k++) {{
        switch ((p[k] + x) & 7) {{
        case 0: h = h {ops} (x << 3); break;
        case 1: h ^= p[k] * {random.randint(3, 999)}u; break;
        case 2: h = (h >> 5) | (h << 59); break;
        case 3: if (h & 1) h += k; else h -= k; break;
        default: h = h * 1099511628211u + p[k];
        }}
    }}
    return h;
}}
uint64_t entry{i}(uint64_t x, const uint8_t *p, int n) {{
    uint8_t buf[64];
    memcpy(buf, p, n < 64 ? n : 64);
    return helper{i}(x, buf, n < 64 ? n : 64) + helper{(i * 7) % (i + 1)}(x ^ {i}u, p, n);
}}""")
open("gen.c", "w").write("\n".join(out) + "\n")
EOF
fi
cat >work.py <<'EOF'
# A Python program with a mix of interpreter work: JSON, regexes, sorting,
# dict-heavy aggregation and string formatting.
import json, re, collections, sys
lines = open("words.txt").read().splitlines()[:300000]
for rnd in range(int(sys.argv[1])):
    counts = collections.Counter()
    pat = re.compile(r"\b([a-m]\w{2,5})\b")
    for line in lines:
        for m in pat.finditer(line):
            counts[m.group(1)] += 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5000]
    blob = json.dumps([{"w": w, "n": n, "s": f"{w}:{n:08d}"} for w, n in top])
    back = json.loads(blob)
    print(len(back), sum(x["n"] for x in back))
EOF

rec xz xz -T2 -6 -c words.txt
rec sort sort -S 100M -o /dev/null words.txt
rec sort-k2 sort -S 100M -k2,2 -k1,1r -o /dev/null words.txt
rec gcc gcc -O2 -c gen.c -o gen.o
rec python python3 work.py 6
if command -v rustc >/dev/null && [ -f "$here/fixtures/src/generics.rs" ]; then
    rec rustc rustc -O -C codegen-units=4 -o generics "$here/fixtures/src/generics.rs"
fi
if [ ! -s system.txt ]; then
    echo "make-big-input: recording system (system-wide)" >&2
    perf record -q -a -g -e cpu-clock -F 999 -o system.data -- sh -c \
        'xz -T2 -3 -c words.txt > /dev/null & sort -S 50M -o /dev/null words.txt; gcc -O1 -c gen.c -o gen1.o; python3 work.py 1 > /dev/null; wait' >/dev/null
    perf script -i system.data >system.tmp
    mv system.tmp system.txt
    rm -f system.data
fi

captures=()
for f in xz sort sort-k2 gcc python rustc system; do
    [ -s "$f.txt" ] && captures+=("$parts/$f.txt")
done
echo "make-big-input: captures: $(du -ch "${captures[@]}" | tail -1 | cut -f1) in ${#captures[@]} files" >&2

[ ${#captures[@]} -gt 0 ] || { echo "make-big-input: no capture was recorded" >&2; exit 1; }

concat "$out" "${captures[@]}"
