#!/usr/bin/env bash
# Bulk reprocessing benchmark: `jobprof reprocess --jobs 2` against the old
# per-directory pipeline.
#
# Generates N (default 200) small result directories from the committed demo
# capture (fixtures/result_dir_demo): every other one as jobprof-record
# publishes it, after processing, with its raw perf.data archived away
# (capture.json, perf-shards.tsv, perf.script.zst), the others
# as the old shell pipeline left them after its own post-processing
# (capture-metadata.txt, perf-shards.tsv, perf.script.gz, no perf.data). Then
# times, on fresh copies:
#   (a) jobprof reprocess --jobs 2 ROOT             (every capture processed)
#   (b) the old way, one directory after another:
#       zcat perf.script.gz | inferno-collapse-perf | inferno-flamegraph > flamegraph.svg
#       (for the new-layout dirs the same from `zstd -dc perf.script.zst`)
#   (c) jobprof reprocess --jobs 2 ROOT again      (nothing left to do)
# and prints the times, the ratio (b)/(a) (target >= 3) and (c) (target < 1 s).
#
#   bash benches/reprocess.sh [--dirs 200] [--jobs 2] [--keep DIR]
#
# Needs zstd, gzip; installs inferno 0.12.8 with cargo when
# inferno-collapse-perf is missing. Builds jobprof in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh

dirs=200 keep= jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --dirs) dirs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "reprocess.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if ! command -v inferno-collapse-perf >/dev/null 2>&1; then
  cargo install --locked inferno --version 0.12.8
fi
cargo build --release --quiet --bin jobprof
jobprof=$(release_dir .)/jobprof

if [ -n "$keep" ]; then
  work=$keep
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
demo=fixtures/result_dir_demo

# make_tree DEST COUNT: the N result dirs, spread over a few levels.
make_tree() {
  local dest=$1 count=$2 i q d
  for i in $(seq 1 "$count"); do
    d=$dest/month_$((i % 7))/result_dir_$((100000 + i))
    mkdir -p "$d"
    cp -r "$demo/profiles" "$d/"
    q=$d/profiles/perf/worker_0/q01
    # Outputs of a demo run in the checkout are not part of the input.
    rm -f "$q"/.postprocess-complete "$q"/stacks.folded "$q"/flamegraph.* \
      "$q"/summary.json "$q"/profile.speedscope.json
    # Both kinds carry symbolized text, no perf.data (archived raw data is
    # usually gone): both sides do the same work, text -> folded -> SVG.
    rm -f "$q"/perf.data.part*
    if [ $((i % 2)) -eq 0 ]; then
      # The old pipeline's layout: key=value metadata, text as gzip, no data.
      zstd -dc -q "$q/perf.script.zst" | gzip -1 >"$q/perf.script.gz"
      rm -f "$q"/perf.script.zst "$q"/perf.data.part* "$q/capture.json"
      printf '%s\n' valid=1 handshake=enabled \
        phases=requested,attached,enabled,stopped,queued,published \
        shard_count=2 job_id=$((100000 + i)) event=cpu-clock:u >"$q/capture-metadata.txt"
    fi
  done
}

echo "generating $dirs result dirs under $work/src"
rm -rf "$work/src"
make_tree "$work/src" "$dirs"
du -sh "$work/src" | sed 's/^/  size: /'

old_way() {
  local q
  while IFS= read -r q; do
    if [ -e "$q/perf.script.gz" ]; then
      zcat "$q/perf.script.gz"
    else
      zstd -dc -q "$q/perf.script.zst"
    fi | inferno-collapse-perf | inferno-flamegraph >"$q/flamegraph.svg"
  done < <(find "$1" -path '*/profiles/perf/worker_*/*' -name 'perf.script.*' -printf '%h\n' | sort -u)
}

now() { date +%s.%N; }

rm -rf "$work/old" && cp -r "$work/src" "$work/old"
rm -rf "$work/new" && cp -r "$work/src" "$work/new"
sync

t0=$(now)
old_way "$work/old"
t1=$(now)
old=$(awk "BEGIN{print $t1 - $t0}")

# Flush the copies' (and the old way's) dirty pages first: jobprof fsyncs
# every output, and an fsync on a file system with gigabytes of unrelated
# writes pending waits for them.
sync
t0=$(now)
"$jobprof" reprocess --jobs "$jobs" "$work/new" >"$work/reprocess.log" 2>&1 || {
  echo "jobprof reprocess failed:"; tail -30 "$work/reprocess.log"; exit 1; }
t1=$(now)
new=$(awk "BEGIN{print $t1 - $t0}")

t0=$(now)
"$jobprof" reprocess --jobs "$jobs" "$work/new" >"$work/noop.log" 2>&1
t1=$(now)
noop=$(awk "BEGIN{print $t1 - $t0}")

svgs_new=$(find "$work/new" -name flamegraph.svg | wc -l)
svgs_old=$(find "$work/old" -name flamegraph.svg | wc -l)
tail -6 "$work/reprocess.log" | sed 's/^/  /'
printf 'old pipeline, one dir after another : %7.2f s  (%d flamegraphs)\n' "$old" "$svgs_old"
printf 'jobprof reprocess --jobs %-2s         : %7.2f s  (%d flamegraphs, plus html, folded, summary)\n' "$jobs" "$new" "$svgs_new"
printf 'ratio                               : %7.1fx  (target >= 3x)\n' "$(awk "BEGIN{print $old / $new}")"
printf 'second run (nothing to do)          : %7.3f s  (target < 1 s)\n' "$noop"
