#!/bin/bash
# A fake `nsys` with Nsight Systems' interactive-session semantics, for
# `jobprof-record sidecar --tool nsys` (tests/nsys/per_query.rs). State
# lives in $FAKE_NSYS_STATE (one launched session per directory):
#   launch [opts] APP...  runs APP; the session exists while it runs
#   start -o OUT -f BOOL   fails without a session, while a collection runs,
#                          or when OUT.nsys-rep/.qdstrm exists and -f is not
#                          true; fails when $FAKE_NSYS_STATE/fail-start holds
#                          a string found in OUT (an injected failure);
#                          takes $FAKE_NSYS_STATE/start-delay seconds
#                          when that file exists (a slow agent start)
#   stop                   returns at once; a background writer then writes
#                          OUT.qdstrm, then OUT.nsys-rep (created empty
#                          first), in bursts of $FAKE_NSYS_CHUNK bytes every
#                          $FAKE_NSYS_PAUSE s ($FAKE_NSYS_BURSTS each), then
#                          removes the .qdstrm as nsys does; no .nsys-rep
#                          when $FAKE_NSYS_STATE/no-rep exists
#                          ($FAKE_NSYS_STATE/skip-import: as Debian's 2022.4,
#                          the .qdstrm only, written before stop returns)
#                          ($FAKE_NSYS_STATE/fail-stop: stop fails and the
#                          collection stays, as a stuck 2022.4 session)
#   --version              prints a version line
# Every call is logged to $FAKE_NSYS_STATE/calls.log: pid, cwd, argv and
# the NSYS_/CUDA_/SLURM_/FAKE_NSYS_ environment.
set -u
state=${FAKE_NSYS_STATE:?FAKE_NSYS_STATE must name the fake session directory}
mkdir -p "$state"
{
  printf '%s call pid=%s cwd=%s' "$(date +%s.%N)" "$$" "$PWD"
  for a in "$@"; do printf ' argv=%q' "$a"; done
  printf ' env=%q\n' "$(env | grep -E '^(NSYS_|CUDA_|SLURM_|FAKE_NSYS_)' | sort | tr '\n' ' ')"
} >>"$state/calls.log"

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
--version | -v)
  echo "NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0 (fake)"
  ;;
launch)
  while [ $# -gt 0 ]; do
    case "$1" in
    --*=*) shift ;;
    -t | --trace | -s | --sample | --session-new | --show-output | -w) shift 2 ;;
    *) break ;;
    esac
  done
  [ $# -gt 0 ] || { echo "Error: launch needs an application" >&2; exit 1; }
  if [ -e "$state/session" ]; then
    echo "Error: a session is already launched" >&2
    exit 1
  fi
  echo $$ >"$state/session"
  trap 'rm -f "$state/session"' EXIT
  "$@"
  exit $?
  ;;
start)
  out="" force=false
  while [ $# -gt 0 ]; do
    case "$1" in
    -o | --output) out=$2; shift 2 ;;
    -f | --force-overwrite) force=$2; shift 2 ;;
    --*=*) shift ;;
    *) shift 2 ;;
    esac
  done
  [ -n "$out" ] || out=$PWD/report1
  if [ -s "$state/start-delay" ]; then sleep "$(cat "$state/start-delay")"; fi
  if [ ! -e "$state/session" ]; then
    echo "Error: no launched session; run nsys launch first" >&2
    exit 1
  fi
  if [ -e "$state/collecting" ]; then
    echo "Error: a collection is already running in this session" >&2
    exit 1
  fi
  if [ -s "$state/fail-start" ] && [[ "$out" == *"$(cat "$state/fail-start")"* ]]; then
    echo "Error: Failed to start the collection: CUPTI initialization failed (injected)" >&2
    exit 1
  fi
  if [ "$force" != true ] && { [ -e "$out.nsys-rep" ] || [ -e "$out.qdstrm" ]; }; then
    echo "Error: $out.nsys-rep already exists; use -f true to overwrite" >&2
    exit 1
  fi
  echo "$out" >"$state/collecting"
  echo "Collection started."
  ;;
stop)
  if [ ! -e "$state/collecting" ]; then
    echo "Error: no collection is running" >&2
    exit 1
  fi
  if [ -e "$state/fail-stop" ]; then
    # As nsys 2022.4's hung stop: the session stays stuck in Generation.
    echo "NotImplementedException" >&2
    exit 1
  fi
  out=$(cat "$state/collecting")
  rm -f "$state/collecting"
  if [ -e "$state/skip-import" ]; then
    # As Debian's nsys 2022.4: the stream written before stop returns, its
    # importer not found.
    head -c "${FAKE_NSYS_CHUNK:-20000}" /dev/urandom >"$out.qdstrm"
    echo "Importer error status: The importer binary and its dependencies were not found."
    echo "Unable to retrieve the importer version: skipping importation of the QDSTRM file."
    exit 0
  fi
  bursts=${FAKE_NSYS_BURSTS:-3} pause=${FAKE_NSYS_PAUSE:-0.3} chunk=${FAKE_NSYS_CHUNK:-20000}
  (
    sleep "$pause"
    for _ in $(seq "$bursts"); do
      head -c "$chunk" /dev/urandom >>"$out.qdstrm" || exit 1
      sleep "$pause"
    done
    [ -e "$state/no-rep" ] && exit 0
    : >"$out.nsys-rep" || exit 1
    for _ in $(seq "$bursts"); do
      sleep "$pause"
      head -c "$chunk" /dev/urandom >>"$out.nsys-rep" || exit 1
    done
    rm -f "$out.qdstrm"
    echo "$out" >>"$state/written"
  ) </dev/null >/dev/null 2>&1 &
  echo "Collection stopped; the report is being written."
  ;;
*)
  echo "Error: unknown command '$cmd'" >&2
  exit 1
  ;;
esac
