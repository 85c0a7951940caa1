#!/usr/bin/env bash
# A real single-node Slurm cluster for jobprof's tests and for developers.
#
#   scripts/slurm-cluster.sh start    install (if missing) and start; prints
#                                     `export SLURM_CONF=...` on stdout
#   scripts/slurm-cluster.sh stop     stop exactly the daemons `start` started
#   scripts/slurm-cluster.sh status   say what runs; exit 0 when the node is up
#
# Typical use:  eval "$(scripts/slurm-cluster.sh start)"
#
# Everything except the export line goes to stderr, so the command can be
# eval'd. Runs as root on Debian 12 without systemd or cgroups: Slurm and
# MUNGE come from Debian, slurm.conf, state, spool, logs and PID files live in
# a scratch directory (JOBPROF_SLURM_DIR, default /tmp/jobprof-slurm). A
# munged that already runs is reused and never stopped; one started here is
# stopped by `stop`. Starting while the cluster runs reuses it.
#
# Environment:
#   JOBPROF_SLURM_DIR       scratch directory (default /tmp/jobprof-slurm)
#   JOBPROF_SLURM_TIMEOUT   seconds to wait for the node to become idle (60)
set -euo pipefail

DIR=${JOBPROF_SLURM_DIR:-/tmp/jobprof-slurm}
CONF=$DIR/slurm.conf
TIMEOUT=${JOBPROF_SLURM_TIMEOUT:-60}
# The daemons live in /usr/sbin, which is not on every PATH.
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf 'slurm-cluster: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# True when PID (from file $1) is alive and its command line contains $2, so
# that a recycled PID never gets a signal meant for one of our daemons.
pid_is() {
  local file=$1 want=$2 pid
  [ -s "$file" ] || return 1
  pid=$(cat "$file")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$want"
}

# True while PID $1 exists and is not a zombie. Our daemons are reparented
# to PID 1 once `start` exits, and PID 1 may reap them only seconds later; a
# zombie has exited, so waiting for it to vanish would only waste time.
alive() {
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# Prints the last lines of the given logs (default: the Slurm daemons').
show_logs() {
  local f
  [ "$#" -gt 0 ] || set -- "$DIR"/log/*.log
  for f in "$@"; do
    [ -s "$f" ] || continue
    printf '\n--- last lines of %s ---\n' "$f" >&2
    tail -n 15 "$f" >&2
  done
}

node_state() {
  SLURM_CONF=$CONF timeout 10 sinfo -h -N -o %T 2>/dev/null | head -n 1 || true
}

# --- installation -----------------------------------------------------------

install_packages() {
  local missing=0 p
  for p in slurmctld slurmd sinfo munged mungekey munge unmunge; do
    command -v "$p" >/dev/null 2>&1 || missing=1
  done
  [ "$missing" = 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "Slurm or MUNGE is missing and installing it needs root"
  log "installing slurmd slurmctld slurm-client munge from Debian"
  # Keep the packages' init scripts from starting daemons with the default
  # configuration: a policy-rc.d that denies, only when none exists already.
  local policy=/usr/sbin/policy-rc.d added_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 0755 "$policy"
    added_policy=1
  fi
  local rc=0
  {
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmd slurmctld slurm-client munge
  } >&2 || rc=$?
  [ "$added_policy" = 1 ] && rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install of Slurm and MUNGE failed (exit $rc)"
}

# --- MUNGE ------------------------------------------------------------------

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
  local key=/etc/munge/munge.key
  if [ ! -s "$key" ]; then
    log "creating $key"
    install -d -o munge -g munge -m 0700 /etc/munge
    mungekey --create --keyfile="$key"
  fi
  chown munge:munge "$key"
  chmod 0400 "$key"

  if munge_works; then
    log "reusing the munged that already runs"
    # Keep the record of a munged an earlier start started; drop a stale one.
    pid_is "$DIR/run/munged.pid" munged || rm -f "$DIR/run/munged.pid"
    return 0
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  log "starting munged"
  # munged daemonizes itself; --force replaces a stale socket or PID file
  # left by a munged that was killed.
  runuser -u munge -- /usr/sbin/munged --force ||
    {
      show_logs /var/log/munge/munged.log
      die "munged did not start"
    }

  for _ in $(seq 50); do
    munge_works && break
    sleep 0.1
  done
  munge_works || {
    show_logs /var/log/munge/munged.log
    die "munged started but 'munge -n | unmunge' fails"
  }
  # Remember the munged we started so that `stop` can stop it (and only it).
  if [ -s /run/munge/munged.pid ]; then
    cp /run/munge/munged.pid "$DIR/run/munged.pid"
  fi
}

# --- slurm.conf -------------------------------------------------------------

write_conf() {
  local host node_hw
  host=$(hostname -s)
  # `slurmd -C` prints the node's real layout (first line: NodeName=... CPUs=
  # ... Boards= SocketsPerBoard= CoresPerSocket= ThreadsPerCore= RealMemory=);
  # giving Slurm all of it avoids the "reconfigured socket/core" complaint.
  node_hw=$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' |
    grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=' |
    tr '\n' ' ')
  [ -n "$node_hw" ] || die "'slurmd -C' printed no node layout"
  local tmp
  tmp=$(mktemp "$DIR/slurm.conf.XXXXXX")
  cat >"$tmp" <<EOF
# Single-node test cluster written by scripts/slurm-cluster.sh; rewritten on
# every fresh start, so do not edit.
ClusterName=jobprof
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.slurm.pid
SlurmdPidFile=$DIR/run/slurmd.slurm.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ReturnToService=2
# Finished jobs stay visible to squeue -t all and scontrol show job.
MinJobAge=3600
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 ${node_hw}State=UNKNOWN
PartitionName=debug Default=YES Nodes=ALL State=UP MaxTime=INFINITE
EOF
  mv "$tmp" "$CONF"
}

# --- start / stop / status --------------------------------------------------

export_line() { printf 'export SLURM_CONF=%q\n' "$CONF"; }

cluster_running() {
  pid_is "$DIR/run/slurmctld.pid" "$CONF" && pid_is "$DIR/run/slurmd.pid" "$CONF"
}

# A start that failed half-way stops what it started, so that the next
# start begins from nothing; the logs stay in the scratch dir.
fail_start() {
  show_logs
  log "error: $1"
  stop_daemons
  stop_pid "$DIR/run/munged.pid" munged munged
  die "the cluster did not start; logs are in $DIR/log"
}

# True when something accepts TCP connections on 127.0.0.1:$1.
port_in_use() {
  timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

wait_until_up() {
  local start=$SECONDS state=""
  while :; do
    if ! pid_is "$DIR/run/slurmctld.pid" "$CONF" || ! pid_is "$DIR/run/slurmd.pid" "$CONF"; then
      fail_start "a Slurm daemon exited during start (logs above)"
    fi
    state=$(node_state)
    case "$state" in
      idle | mixed | allocated) return 0 ;;
    esac
    if ((SECONDS - start >= TIMEOUT)); then
      fail_start "the node is not idle after ${TIMEOUT}s (sinfo says '${state:-nothing}'; logs above)"
    fi
    sleep 0.2
  done
}

start_daemon() {
  local name=$1
  shift
  # setsid: the daemon must not share the caller's process group, so that a
  # Ctrl-C in the caller's terminal does not reach it.
  setsid "$name" -D -f "$CONF" "$@" >>"$DIR/log/$name.stdio.log" 2>&1 </dev/null &
  local pid=$! tries=0
  echo "$pid" >"$DIR/run/$name.pid"
  # Until the child has exec'd, /proc/PID/cmdline is still this script's,
  # and pid_is would take a starting daemon for a dead one (a start failed
  # that way once, with an empty slurmd log). Wait for the exec, or for the
  # child to die, which wait_until_up then reports.
  while ! pid_is "$DIR/run/$name.pid" "$CONF" && alive "$pid" && ((tries++ < 100)); do
    sleep 0.05
  done
}

cmd_start() {
  local t0=$SECONDS
  mkdir -p "$DIR/run" "$DIR/log"
  if cluster_running; then
    log "reusing the cluster that already runs from $DIR"
    wait_until_up
    export_line
    return 0
  fi
  # Half a cluster (one daemon died): clear it out and start afresh.
  stop_daemons
  install_packages
  ensure_munge
  # A fresh start is a fresh cluster: no jobs recovered from an earlier run,
  # and logs that show only this run.
  rm -rf "$DIR/state" "$DIR/spool" "$DIR/log"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
  write_conf
  # Another cluster on this machine would answer our sinfo on the default
  # ports and make a failed start look like success.
  local port
  for port in 6817 6818; do
    if port_in_use "$port"; then
      die "port $port is in use (another slurmctld/slurmd, perhaps a cluster \
started with another JOBPROF_SLURM_DIR); stop it first"
    fi
  done
  log "starting slurmctld and slurmd (config $CONF)"
  start_daemon slurmctld
  start_daemon slurmd
  wait_until_up
  log "node $(hostname -s) is $(node_state) after $((SECONDS - t0))s"
  export_line
}

# Sends TERM to the daemon in PID file $1 (when it is ours), then KILL after
# a grace period; removes the PID file.
stop_pid() {
  local file=$1 want=$2 name=$3 pid
  if pid_is "$file" "$want"; then
    pid=$(cat "$file")
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      alive "$pid" || break
      sleep 0.1
    done
    if alive "$pid"; then
      log "$name (pid $pid) ignored TERM for 10s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

stop_daemons() {
  stop_pid "$DIR/run/slurmd.pid" "$CONF" slurmd
  stop_pid "$DIR/run/slurmctld.pid" "$CONF" slurmctld
}

cmd_stop() {
  if pid_is "$DIR/run/slurmctld.pid" "$CONF"; then
    # Jobs left running would keep their slurmstepd and processes alive
    # after slurmd stops: cancel them and give them a moment to end.
    local jobs
    jobs=$(SLURM_CONF=$CONF timeout 10 squeue -h -o %A 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      log "cancelling jobs still in the queue: ${jobs//$'\n'/ }"
      # shellcheck disable=SC2086
      SLURM_CONF=$CONF timeout 10 scancel $jobs 2>/dev/null || true
      for _ in $(seq 50); do
        [ -z "$(SLURM_CONF=$CONF timeout 10 squeue -h -o %A 2>/dev/null || true)" ] && break
        sleep 0.2
      done
    fi
  fi
  stop_daemons
  stop_pid "$DIR/run/munged.pid" munged munged
  log "stopped"
}

cmd_status() {
  local name up=0
  for name in slurmctld slurmd; do
    if pid_is "$DIR/run/$name.pid" "$CONF"; then
      log "$name runs (pid $(cat "$DIR/run/$name.pid"))"
    else
      log "$name is not running"
    fi
  done
  if pid_is "$DIR/run/munged.pid" munged; then
    log "munged runs (pid $(cat "$DIR/run/munged.pid"), started by this script)"
  elif munge_works 2>/dev/null; then
    log "munged runs (not started by this script)"
  else
    log "munged is not running"
  fi
  if cluster_running; then
    local state
    state=$(node_state)
    log "node state: ${state:-unknown}"
    case "$state" in
      idle | mixed | allocated)
        export_line
        up=1
        ;;
    esac
  fi
  [ "$up" = 1 ]
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
