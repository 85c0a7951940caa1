#!/bin/sh
# What nsys does in one rank, for the fake nsight-slurm: run the command and
# write the report to the -o pattern (expanded like nsys's %q{VAR}) in two
# bursts when the session ends: at SIGTERM, or when the command exits.
# Leaves <report>.started and, on SIGTERM, <report>.term-received.
pattern="$1"
shift
out=$(printf '%s' "$pattern" | sed \
  -e "s/%q{SLURM_JOB_ID}/$SLURM_JOB_ID/g" \
  -e "s/%q{SLURMD_NODENAME}/$SLURMD_NODENAME/g" \
  -e "s/%q{SLURM_PROCID}/$SLURM_PROCID/g")
write_report() {
  : > "$out.nsys-rep"
  sleep 0.3
  head -c 50000 /dev/urandom >> "$out.nsys-rep"
  sleep 0.3
  head -c 50000 /dev/urandom >> "$out.nsys-rep"
  exit 0
}
"$@" &
child=$!
trap 'echo TERM > "$out.term-received"; kill $child 2>/dev/null; write_report' TERM
touch "$out.started"
wait "$child"
write_report
