#!/usr/bin/env bash
# Records a running process into a capture directory laid out exactly as
# jobprof-record publishes one (or, with --legacy, as the old shell pipeline
# did), with plain `perf record` per group of threads. Used by the process
# tests, benches/process.sh and to make fixtures/result_dir_demo; not a
# replacement for jobprof-record (no tokens, no handshake with a driver).
#
#   scripts/perf-capture.sh --pid PID --out PERF_ROOT [--worker N] [--query Q]
#       [--shards K] [--seconds S] [--event E] [--frequency HZ]
#       [--call-graph fp|dwarf,SIZE] [--job-id ID] [--legacy]
#
# Writes PERF_ROOT/worker_N/Q/{perf.data | perf.data.partNNN, perf-shards.tsv,
# perf-dropped-tids.tsv, perf-target-tids.txt, perf-record.partNNN.log,
# capture.json | capture-metadata.txt} and PERF_ROOT/worker_N/{symfs/,
# worker.maps}. The TIDs of /proc/PID/task, sorted numerically, are cut into K
# contiguous shards; each shard is one `perf record -t ... --inherit`, started
# and confirmed ready through its control FIFO (ping/ack), stopped with SIGINT
# after S seconds. The capture appears in PERF_ROOT at once (rename).
set -euo pipefail

pid= out= worker=0 query=q1 shards=1 seconds=2 event=cpu-clock:u freq=199
call_graph=fp job_id= legacy=0
while [ $# -gt 0 ]; do
  case "$1" in
    --pid) pid=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --worker) worker=$2; shift 2 ;;
    --query) query=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --event) event=$2; shift 2 ;;
    --frequency) freq=$2; shift 2 ;;
    --call-graph) call_graph=$2; shift 2 ;;
    --job-id) job_id=$2; shift 2 ;;
    --legacy) legacy=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "perf-capture.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$pid" ] && [ -n "$out" ] || { echo "perf-capture.sh: --pid and --out are required" >&2; exit 2; }
[ -d "/proc/$pid" ] || { echo "perf-capture.sh: no process $pid" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf-capture.sh: perf not found" >&2; exit 1; }

now_ns() { date +%s%N; }
worker_dir="$out/worker_$worker"
final="$worker_dir/$query"
stage="$worker_dir/.$query.publishing"
[ -e "$final" ] && { echo "perf-capture.sh: $final exists" >&2; exit 1; }
rm -rf "$stage"
mkdir -p "$stage"

# Symbols: every executable file-backed mapping, copied under symfs/ at its
# absolute path (what jobprof-record's symfs snapshot does).
cp "/proc/$pid/maps" "$worker_dir/worker.maps"
awk '$2 ~ /x/ && $6 ~ /^\// {print $6}' "/proc/$pid/maps" | sort -u | while read -r f; do
  mkdir -p "$worker_dir/symfs$(dirname "$f")"
  cp "/proc/$pid/root$f" "$worker_dir/symfs$f" 2>/dev/null || cp "$f" "$worker_dir/symfs$f"
done

mapfile -t tids < <(ls "/proc/$pid/task" | sort -n)
printf '%s\n' "${tids[@]}" > "$stage/perf-target-tids.txt"
n=${#tids[@]}
[ "$shards" -le "$n" ] || shards=$n
per=$(( (n + shards - 1) / shards ))
cg=(-g); [ "$call_graph" = fp ] || cg=(--call-graph "$call_graph")
t_requested=$(now_ns)
pids=() files=() counts=() firsts=() lasts=()
for ((s = 0; s < shards; s++)); do
  group=("${tids[@]:s*per:per}")
  [ ${#group[@]} -gt 0 ] || break
  if [ "$shards" -eq 1 ]; then file=perf.data; else file=$(printf 'perf.data.part%03d' "$s"); fi
  ctl="$stage/.ctl$s" ack="$stage/.ack$s"
  mkfifo "$ctl" "$ack"
  tidlist=$(IFS=,; echo "${group[*]}")
  perf record --inherit --buildid-all --no-buildid-cache -t "$tidlist" -e "$event" \
    -F "$freq" "${cg[@]}" --control "fifo:$ctl,$ack" -o "$stage/$file" \
    >"$stage/$(printf 'perf-record.part%03d.log' "$s")" 2>&1 &
  p=$!
  exec {cfd}<>"$ctl" {afd}<>"$ack"
  echo ping >&"$cfd"
  read -r -t 60 -u "$afd" reply || { echo "perf-capture.sh: shard $s never answered ping" >&2; kill "$p"; exit 1; }
  exec {cfd}>&- {afd}<&-
  pids+=("$p") files+=("$file") counts+=("${#group[@]}") firsts+=("${group[0]}") lasts+=("${group[-1]}")
done
t_enabled=$(now_ns)
sleep "$seconds"
t_disable=$(now_ns)
kill -INT "${pids[@]}" 2>/dev/null || true
statuses=()
for p in "${pids[@]}"; do
  if wait "$p"; then statuses+=(0); else statuses+=($?); fi
done
t_stopped=$(now_ns)
rm -f "$stage"/.ctl* "$stage"/.ack*

count=${#pids[@]}
valid=true reason=null
for st in "${statuses[@]}"; do
  if [ "$st" != 0 ] && [ "$st" != 130 ]; then valid=false reason="\"a shard ended with exit status $st\""; fi
done
if [ "$legacy" = 1 ]; then
  printf 'shard\tphase\tperf_pid\tthread_count\tfirst_tid\tlast_tid\tcurrent_open_fds\topen_fds_at_enable\texit_status\tdata_file\tdata_bytes\n' > "$stage/perf-shards.tsv"
else
  printf 'shard\tphase\tperf_pid\tthread_count\tfirst_tid\tlast_tid\texit_status\tdata_file\tdata_bytes\n' > "$stage/perf-shards.tsv"
  printf 'shard\tattempt\ttid\treason\n' > "$stage/perf-dropped-tids.tsv"
fi
for ((s = 0; s < count; s++)); do
  bytes=$(stat -c %s "$stage/${files[s]}")
  if [ "$legacy" = 1 ]; then
    # The old manifest names perf.data.partNNN even for a lone perf.data.
    printf '%s\tstopped\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(printf %03d "$s")" "${pids[s]}" \
      "${counts[s]}" "${firsts[s]}" "${lasts[s]}" 0 0 "${statuses[s]}" \
      "$(printf 'perf.data.part%03d' "$s")" "$bytes" >> "$stage/perf-shards.tsv"
  else
    printf '%s\tstopped\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "${pids[s]}" "${counts[s]}" \
      "${firsts[s]}" "${lasts[s]}" "${statuses[s]}" "${files[s]}" "$bytes" >> "$stage/perf-shards.tsv"
  fi
done
perf_version=$(perf --version)
exe=$(readlink "/proc/$pid/exe" 2>/dev/null || echo unknown)
t_published=$(now_ns)
if [ "$legacy" = 1 ]; then
  # The old sampler's format: one block per phase, the facts repeated.
  common="timestamp_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
hostname=$(hostname -s)
slurm_job_id=${job_id:-unknown}
worker_id=$worker
worker_pid=$pid
query_profile_id=$query
event=$event
frequency=$freq
call_graph=$call_graph
user_regs=perf-default
worker_exe=$exe"
  total=0; for f in "${files[@]}"; do total=$((total + $(stat -c %s "$stage/$f"))); done
  cat > "$stage/capture-metadata.txt" <<EOF
capture_phase=start
$common
perf_target_mode=sharded-tids-with-inheritance
perf_threads_per_shard=$per
perf_control_handshake=enabled
perf_shard_count=$count
capture_phase=stop
$common
node_local_perf_data_shards=$count
node_local_perf_data_bytes=$total
capture_phase=queued
$common
sample_loss=0%
capture_valid=$([ "$valid" = true ] && echo 1 || echo 0)
capture_phase=publish_start
$common
perf_data_shards=$count
perf_data_bytes=$total
perf_data_files=$(IFS=,; echo "${files[*]}")
capture_phase=published
$common
EOF
else
  job_json=null; [ -z "$job_id" ] || job_json="\"$job_id\""
  cat > "$stage/capture.json" <<EOF
{
  "format_version": 1,
  "recorder_version": "perf-capture.sh",
  "query": "$query",
  "worker": $worker,
  "host": "$(hostname -s)",
  "slurm_job_id": $job_json,
  "pid": $pid,
  "exe": "$exe",
  "event": "$event",
  "frequency": $freq,
  "call_graph": "$call_graph",
  "perf_version": "$perf_version",
  "threads_per_shard": $per,
  "shard_count": $count,
  "target_thread_count": $n,
  "dropped_thread_count": 0,
  "enable_requested_unix_ns": $t_requested,
  "enabled_unix_ns": $t_enabled,
  "disable_requested_unix_ns": $t_disable,
  "disabled_unix_ns": $t_stopped,
  "phases": [
    {"phase": "requested", "unix_ns": $t_requested},
    {"phase": "attached", "unix_ns": $t_enabled},
    {"phase": "enabled", "unix_ns": $t_enabled},
    {"phase": "disabled", "unix_ns": $t_stopped},
    {"phase": "stopped", "unix_ns": $t_stopped},
    {"phase": "queued", "unix_ns": $t_stopped},
    {"phase": "published", "unix_ns": $t_published}
  ],
  "ended_by": "stop",
  "valid": $valid,
  "reason": $reason
}
EOF
fi
mv "$stage" "$final"
echo "$final"
