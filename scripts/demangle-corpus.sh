#!/usr/bin/env bash
# demangle-corpus.sh: regenerates tests/expected/demangle-corpus.tsv, the
# corpus of real mangled names that `demangle::` in tests/ checks jobprof's
# demangler against (docs/symbols.md, "How names are demangled").
#
#   scripts/demangle-corpus.sh [EXTRA_ELF...]
#
# Downloads the pinned wheels below from PyPI into a temporary directory
# (never into the repository), takes the function symbols of their shared
# objects (and of EXTRA_ELF files; by default the `rustup` on PATH, for
# legacy-mangled Rust), picks a few hundred of every kind by a fixed rule
# (evenly spaced in sorted order, so a rerun on the same inputs picks the
# same names) and writes `MANGLED<TAB>EXPECTED` lines, EXPECTED being what
# this machine's `c++filt -p -i` prints for MANGLED given as an argument:
# libiberty's cplus_demangle(name, DMGL_ANSI), which prints what perf 6.1's
# cplus_demangle(name, DMGL_NO_OPTS) does (DMGL_ANSI changes nothing in
# the GNU v3 and Rust demanglers). Needs python3 with pip, unzip, nm and
# c++filt (binutils 2.40 made the committed file).
#
# Known differences: after regenerating, run
#   JOBPROF_BLESS=1 cargo test --test integration demangle::corpus
# which adds a third column, jobprof's text, to the lines where jobprof
# still differs from c++filt; review that diff.
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/expected/demangle-corpus.tsv
wheels=(pyarrow==26.0.1 polars-runtime-32==2.1.0 datafusion==55.0.0)
extra=("$@")
if [ ${#extra[@]} -eq 0 ] && command -v rustup >/dev/null; then
    extra=("$(readlink -f "$(command -v rustup)")")
fi
for tool in python3 unzip nm c++filt; do
    command -v "$tool" >/dev/null || { echo "demangle-corpus.sh: $tool is missing" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps -d "$tmp/wheels" "${wheels[@]}"
for w in "$tmp"/wheels/*.whl; do unzip -q -o "$w" -d "$tmp/x"; done
mapfile -t objects < <(find "$tmp/x" -type f -name '*.so*' -size +1M | sort)
for f in "${objects[@]}" "${extra[@]}"; do
    nm --no-demangle --defined-only "$f" 2>/dev/null || true
    nm -D --no-demangle --defined-only --without-symbol-versions "$f"
done | awk '$2 ~ /^[TtWwi]$/ && $3 ~ /^_[ZR]/ { print $3 }' | sort -u > "$tmp/names"
python3 - "$tmp/names" > "$tmp/picked" <<'PY'
import re, sys
names = [n for n in open(sys.argv[1]).read().split() if len(n) <= 400]
# (kind, pattern, how many): the schemes and suffixes perf meets.
kinds = [
    ("rust v0 with a .NNNN suffix", r"^_R[^.]*\.\d+$", 60),
    ("rust v0 with another suffix", r"^_R[^.]*\..*[^\d.]", 10),
    ("rust v0 closure or shim", r"^_R[^.]*(NC|NS|Ns)[^.]*$", 30),
    ("rust v0", r"^_R[^.]*$", 50),
    ("rust legacy", r"^_ZN.*17h[0-9a-f]{16}E$", 30),
    ("rust legacy with a suffix", r"^_ZN.*17h[0-9a-f]{16}E\..+", 30),
    ("c++ function type in template arguments", r"^_Z[^.]*I[^.]*F[^.]*$", 60),
    ("c++ lambda", r"^_Z[^.]*Ul[^.]*E\d*_", 30),
    ("c++ .part.N", r"^_Z.*\.part\.\d+", 15),
    ("c++ .cold", r"^_Z.*\.cold$", 15),
    ("c++ .isra.N", r"^_Z.*\.isra\.\d+", 15),
    ("c++ .constprop.N", r"^_Z.*\.constprop\.\d+", 10),
    ("c++ .lto_priv.N", r"^_Z.*\.lto_priv\.\d+", 10),
    ("c++ .localalias", r"^_Z.*\.localalias", 5),
    ("c++ .llvm.N", r"^_Z.*\.llvm\.\d+", 10),
    ("c++ thunk", r"^_ZT[hvc]", 20),
    ("c++ TLS function", r"^_ZT[HW]", 5),
    ("c++ abi tag", r"^_Z[^.]*B5cxx11", 10),
    ("c++ literal template argument", r"^_Z[^.]*L[a-z]\d+E", 15),
    ("c++ operator", r"^_ZN[^.]*(cl|ix|eq|lt|ls|pl)E", 10),
    ("c++", r"^_Z[^.]*$", 40),
]
picked = set()
for kind, pattern, count in kinds:
    found = [n for n in names if re.search(pattern, n) and n not in picked]
    step = max(1, len(found) // count)
    for n in found[::step][:count]:
        picked.add(n)
for n in sorted(picked):
    print(n)
PY
tr '\n' '\0' < "$tmp/picked" | xargs -0 -n 500 c++filt -p -i > "$tmp/expected"
{
    echo "# Real mangled names and what c++filt -p -i ($(c++filt --version | head -1)) prints for each."
    echo "# From: ${wheels[*]} ${extra[*]##*/}. Regenerate with scripts/demangle-corpus.sh."
    paste "$tmp/picked" "$tmp/expected"
} > "$out"
echo "demangle-corpus.sh: $(grep -vc '^#' "$out") names written to $out" >&2
