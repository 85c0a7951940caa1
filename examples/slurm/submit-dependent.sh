#!/bin/bash
# Submits the benchmark job without its in-job processing step, and the
# processing as a dependent job that starts when the benchmark has ended
# (afterany: also after a failure or a timeout, so that the captures that
# were published still get their flamegraphs).
#
#   examples/slurm/submit-dependent.sh [extra sbatch options for the benchmark...]
#
# Run it from the directory where result_dir_<jobid> should appear. The
# variables of benchmark.sbatch (JOBPROF, JOBPROF_RECORD, QUERIES, ...) are
# passed on (--export=ALL).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$(sbatch --parsable --export=ALL,PROCESS_IN_JOB=0 "$@" "$here/benchmark.sbatch")
bench=${bench%%;*} # --parsable prints "id" or "id;cluster"
result_dir=$PWD/result_dir_$bench
post=$(sbatch --parsable --dependency="afterany:$bench" \
  --export=ALL,RESULT_DIR="$result_dir" "$here/process-after.sbatch")
post=${post%%;*}
echo "benchmark job $bench -> $result_dir"
echo "processing job $post (starts after $bench ends)"
