# Sourced by the benchmark scripts: where `cargo build --release` puts the
# binaries. .cargo/config.toml builds for the host triple, so that is
# target/<host triple>/release (target/release where a build went there).
release_dir() {
  local dir
  dir=$1/target/$(rustc -vV | sed -n 's/^host: //p')/release
  [ -d "$dir" ] || dir=$1/target/release
  echo "$dir"
}
