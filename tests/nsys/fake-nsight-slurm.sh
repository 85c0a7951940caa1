#!/bin/sh
# A faithful stand-in for the nsight-slurm wrapper (Nsight Systems cannot run
# on the test machines). Every call appends its working directory,
# SLURM_SUBMIT_DIR, SLURMD_NODENAME and argv to $FAKE_NSIGHT_SLURM_CALLS.
# Like the real wrapper, it keeps its job state under SLURM_SUBMIT_DIR,
# refuses a non-empty report workspace, refuses a second coordinator, and
# its `srun` launches the ranks as steps named nsight-slurm-connector, each
# running nsys (here: fake-nsys-rank beside this script) with the configured
# -o pattern. FAKE_NSIGHT_SLURM_FAIL=<subcommand> makes that subcommand fail.
calls="${FAKE_NSIGHT_SLURM_CALLS:?}"
{
  printf 'cwd=%s\n' "$PWD"
  printf 'submit=%s\n' "${SLURM_SUBMIT_DIR-<unset>}"
  printf 'node=%s\n' "${SLURMD_NODENAME-<unset>}"
  for a in "$@"; do printf 'arg=%s\n' "$a"; done
  printf 'end\n'
} >> "$calls"
if [ "${FAKE_NSIGHT_SLURM_FAIL-}" = "$1" ]; then
  echo "nsight-slurm: $1: simulated failure" >&2
  exit 7
fi
state="${SLURM_SUBMIT_DIR:?nsight-slurm needs SLURM_SUBMIT_DIR}/.nsight-slurm"
mkdir -p "$state/config"
case "$1" in
configure)
  [ $# -eq 3 ] || { echo "usage: nsight-slurm configure KEY VALUE" >&2; exit 2; }
  case "$2" in
  tool-path|tool-command|profiling-mode|tool-options) ;;
  report-output)
    if [ -n "$(ls -A "$3" 2>/dev/null)" ]; then
      echo "nsight-slurm: report output $3 is not empty" >&2; exit 1
    fi ;;
  *) echo "nsight-slurm: unknown setting $2" >&2; exit 2 ;;
  esac
  printf '%s' "$3" > "$state/config/$2"
  echo "configured $2" ;;
coordinator)
  case "$2" in
  start)
    for k in tool-path tool-command profiling-mode tool-options report-output; do
      [ -f "$state/config/$k" ] || { echo "nsight-slurm: $k not configured" >&2; exit 1; }
    done
    if [ -f "$state/coordinator" ]; then
      echo "nsight-slurm: a coordinator is already running ($(cat "$state/coordinator"))" >&2; exit 1
    fi
    echo "tcp://$SLURMD_NODENAME:29500" > "$state/coordinator"
    echo "coordinator listening on tcp://$SLURMD_NODENAME:29500" ;;
  stop)
    [ "$3" = --force ] || [ -f "$state/coordinator" ] || { echo "nsight-slurm: no coordinator" >&2; exit 1; }
    rm -f "$state/coordinator"
    echo "coordinator stopped" ;;
  *) echo "nsight-slurm: unknown coordinator command $2" >&2; exit 2 ;;
  esac ;;
stop)
  echo "sessions of job $3 stopped" ;;
srun)
  [ -f "$state/coordinator" ] || { echo "nsight-slurm: no coordinator running" >&2; exit 1; }
  pattern=$(tr ' ' '\n' < "$state/config/tool-options" | sed -n '/^-o$/{n;p;}')
  rank="$(dirname "$0")/fake-nsys-rank"
  shift
  n=0
  for a in "$@"; do [ "$a" = "--" ] && break; n=$((n + 1)); done
  i=0
  for a in "$@"; do
    shift
    if [ $i -eq $n ]; then set -- "$@" "$a" "$rank" "$pattern"; else set -- "$@" "$a"; fi
    i=$((i + 1))
  done
  exec srun --export=ALL -J nsight-slurm-connector "$@" ;;
*)
  echo "nsight-slurm: unknown command $1" >&2; exit 2 ;;
esac
