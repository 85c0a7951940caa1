#!/usr/bin/env bash
# Compares the outputs two jobprof binaries write for the same captures,
# byte for byte where the format allows: every file `jobprof process
# --force --formats all` writes, in copies of each result directory given
# (fixtures, the old pipeline's result dirs, a job of benches/job.sh).
# Paths are compared with the copies' locations taken out; summary.json
# without its timings, tool version and dates; the marker, index.json and
# the query pages' sources.json without inode numbers, time stamps and the
# sizes of summary.json (its timings' digits), of perf.script.zst (its
# text is compared decompressed: how it is cut into zstd frames follows
# the time slices, which follow --jobs) and of the pprof profiles (compared
# gunzipped: a change of gzip level changes only their size). Prints one line per differing
# file and exits 1 when any differs.
#
#   bash benches/compare-outputs.sh BEFORE_BIN AFTER_BIN RESULT_DIR...
#   JOBPROF_ARGS="--no-inline --time-slices 3" bash benches/compare-outputs.sh ...
# (JOBPROF_ARGS: more options for both runs of `jobprof process`)
set -uo pipefail
before=$1 after=$2; shift 2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
status=0
norm() {
  norm1 "$1" | sed -e "s|$work/old|W|g" -e "s|$work/new|W|g" \
    -e 's|/proc/[0-9]*/fd/[0-9]*|/proc/PID/fd/N|g' -e 's/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9:]*Z/TIME/g' |
    grep -avE '"(ino|summary.json|perf.script.zst|[a-z]*.pb.gz)":'
}
norm1() {
  case "$1" in
    *summary.json) python3 - "$1" <<'PY'
import json, sys
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items()
                if k not in ("timings", "tool_version", "generated", "processed_at", "elapsed",
                             "seconds", "processing", "created", "prepare", "pass", "render")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
print(json.dumps(strip(json.load(open(sys.argv[1]))), indent=1, sort_keys=True))
PY
    ;;
    *.zst) zstd -dcq "$1" ;;
    *.gz) gzip -dc "$1" ;;
    *.postprocess-complete) grep -v -e completed -e tool_version -e '"at"' "$1" ;;
    *) cat "$1" ;;
  esac
}
for dir in "$@"; do
  name=$(basename "$dir")
  # Side directories of equal length: paths cut to a width cut alike.
  for side in old new; do
    rm -rf "$work/$side"; mkdir -p "$work/$side"
    cp -a "$dir" "$work/$side/$name"
    bin=$before; [ "$side" = new ] && bin=$after
    # shellcheck disable=SC2086 # JOBPROF_ARGS is a list of options
    "$bin" process --force --formats all ${JOBPROF_ARGS:-} "$work/$side/$name" >"$work/$side.out" 2>"$work/$side.err"
    echo "$side exit $?" >> "$work/$side.out"
  done
  n=0
  while IFS= read -r f; do
    rel=${f#"$work/new/"}
    b=$work/old/$rel
    if [ ! -e "$b" ]; then echo "only after: $rel"; status=1; continue; fi
    if ! cmp -s <(norm "$b") <(norm "$f"); then
      echo "DIFFERS: $rel"; status=1
      diff <(norm "$b") <(norm "$f") | head -4
    fi
    n=$((n + 1))
  done < <(find "$work/new/$name" -type f -newer "$work/old.out" | sort)
  lines() { sed -e 's/([0-9.]*s)//' -e "s|$work/old|W|g" -e "s|$work/new|W|g" -e 's/^old exit/exit/' -e 's/^new exit/exit/' "$1"; }
  if ! diff -q <(lines "$work/old.out") <(lines "$work/new.out") >/dev/null; then
    echo "result lines differ for $name:"; diff <(lines "$work/old.out") <(lines "$work/new.out") | head -5
    status=1
  fi
  echo "$name: $n output files compared"
done
exit $status
