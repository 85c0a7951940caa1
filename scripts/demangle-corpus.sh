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
# legacy-mangled Rust), asks this machine's `c++filt -p -i` for each (given
# as an argument: libiberty's cplus_demangle(name, DMGL_ANSI), which prints
# what perf 6.1's cplus_demangle(name, DMGL_NO_OPTS) does; DMGL_ANSI changes
# nothing in the GNU v3 and Rust demanglers), picks up to a few dozen names
# of every kind below by a fixed rule (evenly spaced in sorted order, so a
# rerun on the same inputs picks the same names) and writes
# `MANGLED<TAB>EXPECTED` lines. The kinds include those libiberty prints
# its own way: pointer-to-member types, local names (`_ZZ`) and their
# closures' constructors, pack expansions, unnamed types, thunks, and the
# names it leaves mangled (a node printed inside two prints of itself, a
# name over 1024 characters). Needs python3 with pip, unzip, nm and c++filt
# (binutils 2.40 made the committed file).
#
# Known differences: after regenerating, run
#   JOBPROF_BLESS=1 cargo test --test integration demangle::corpus
# which adds a third column, jobprof's text, to the lines where jobprof
# still differs from c++filt; review that diff.
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/expected/demangle-corpus.tsv
wheels=(pyarrow==26.0.1 polars-runtime-32==2.1.0 datafusion==55.0.0 pyvelox==0.2.0)
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
tr '\n' '\0' < "$tmp/names" | xargs -0 -n 500 c++filt -p -i > "$tmp/demangled"
paste "$tmp/names" "$tmp/demangled" > "$tmp/pairs"
python3 - "$tmp/pairs" > "$tmp/picked" <<'PY'
import re, sys
pairs = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
# (kind, pattern on the mangled name, how many, longest name): names up to
# that many characters whose text is at most 1500, so the corpus stays
# readable; None: only names over libiberty's 1024.
kinds = [
    ("rust v0 with a .NNNN suffix", r"^_R[^.]*\.\d+$", 60, 400),
    ("rust v0 with another suffix", r"^_R[^.]*\..*[^\d.]", 10, 400),
    ("rust v0 closure or shim", r"^_R[^.]*(NC|NS|Ns)[^.]*$", 30, 400),
    ("rust v0", r"^_R[^.]*$", 50, 400),
    ("rust legacy", r"^_ZN.*17h[0-9a-f]{16}E$", 30, 400),
    ("rust legacy with a suffix", r"^_ZN.*17h[0-9a-f]{16}E\..+", 30, 400),
    ("c++ function type in template arguments", r"^_Z[^.]*I[^.]*F[^.]*$", 60, 400),
    ("c++ lambda", r"^_Z[^.]*Ul[^.]*E\d*_", 30, 400),
    ("c++ .part.N", r"^_Z.*\.part\.\d+", 15, 400),
    ("c++ .cold", r"^_Z.*\.cold$", 15, 400),
    ("c++ .isra.N", r"^_Z.*\.isra\.\d+", 15, 400),
    ("c++ .constprop.N", r"^_Z.*\.constprop\.\d+", 10, 400),
    ("c++ .lto_priv.N", r"^_Z.*\.lto_priv\.\d+", 10, 400),
    ("c++ .localalias", r"^_Z.*\.localalias", 5, 400),
    ("c++ .llvm.N", r"^_Z.*\.llvm\.\d+", 10, 400),
    ("c++ thunk", r"^_ZT[hvc]", 20, 400),
    ("c++ virtual thunk", r"^_ZTv", 20, 400),
    ("c++ TLS function", r"^_ZT[HW]", 5, 400),
    ("c++ abi tag", r"^_Z[^.]*B5cxx11", 10, 400),
    ("c++ literal template argument", r"^_Z[^.]*L[a-z]\d+E", 15, 400),
    ("c++ operator", r"^_ZN[^.]*(cl|ix|eq|lt|ls|pl)E", 10, 400),
    # What libiberty prints its own way (vendor/cpp_demangle's fixes).
    ("c++ pointer to member function", r"^_Z[^.]*M(N|S[t_0-9A-Z]|[1-9])[^.]*F", 60, 600),
    ("c++ reference to a pointer to member", r"^_Z[^.]*[RO]M(N|S[t_0-9A-Z]|[1-9])", 20, 600),
    ("c++ local name", r"^_ZZ", 60, 600),
    ("c++ local closure's constructor or destructor", r"^_ZZ.*E[NK]*Ul[^.]*E\d*_[CD]\d", 30, 600),
    ("c++ standard substitution's constructor or destructor", r"NS[iosd][CD]\d", 15, 600),
    ("c++ pack expansion", r"^_Z[^.]*Dp", 60, 600),
    ("c++ pack expansion in an expression", r"^_Z[^.]*sp", 15, 600),
    ("c++ unnamed type", r"^_Z[^.]*Ut\d*_", 25, 600),
    ("c++ default argument scope", r"^_Z[^.]*Ed\d*_", 15, 600),
    ("c++ address of a function", r"^_Z[^.]*XadL_Z", 30, 600),
    ("c++ sr expression", r"^_Z[^.]*sr", 30, 600),
    ("c++ empty template argument list", r"^_Z[^.]*[0-9]IE", 10, 600),
    ("c++ that c++filt leaves mangled", r"^_Z[^.]*$", 40, 700),
    ("c++ over 1024 characters", r"^_Z", 3, None),
    ("c++", r"^_Z[^.]*$", 40, 400),
]
picked = {}
for kind, pattern, count, limit in kinds:
    unchanged = kind == "c++ that c++filt leaves mangled"
    found = [
        (n, d) for n, d in pairs
        if n not in picked
        and re.search(pattern, n)
        and (not unchanged or n == d)
        and (len(n) > 1024 if limit is None else len(n) <= limit and len(d) <= 1500)
    ]
    step = max(1, len(found) // count)
    for n, d in found[::step][:count]:
        picked[n] = d
for n in sorted(picked):
    print(f"{n}\t{picked[n]}")
PY
{
    echo "# Real mangled names and what c++filt -p -i ($(c++filt --version | head -1)) prints for each."
    echo "# From: ${wheels[*]} ${extra[*]##*/}. Regenerate with scripts/demangle-corpus.sh."
    cat "$tmp/picked"
} > "$out"
echo "demangle-corpus.sh: $(grep -vc '^#' "$out") names written to $out" >&2
