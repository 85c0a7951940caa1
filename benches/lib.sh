# Sourced by the benchmark scripts: where `cargo build --release` puts the
# binaries. .cargo/config.toml builds for the host triple, so that is
# target/<host triple>/release (target/release where a build went there).
release_dir() {
  local dir
  dir=$1/target/$(rustc -vV | sed -n 's/^host: //p')/release
  [ -d "$dir" ] || dir=$1/target/release
  echo "$dir"
}

# Milliseconds since $1 (a `date +%s%N` stamp).
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# The median of the numbers on stdin (space or newline separated; none:
# an empty line).
median() { tr ' ' '\n' | { grep . || true; } | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# A new directory for a benchmark's own symbol cache, under ~/.cache and not
# /tmp: as root, jobprof keeps no cache below a directory others may write
# (docs/symbols.md), and a run would go on without one. The caller removes it.
bench_cache_dir() { mkdir -p "$HOME/.cache" && mktemp -d -p "$HOME/.cache" jobprof-bench.XXXXXX; }
