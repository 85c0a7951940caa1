# The benchmark driver's start_profiler/stop_profiler for its per-query
# Nsight Systems loop, as its team wrote them (from the description in
# docs/nsys.md): write the start token for every worker, wait up to 60 s
# for each `started`; stop writes the stop tokens and returns. Sourced by
# tests/nsys/per_query.rs, unchanged apart from the wait limit being a
# variable (NSYS_START_WAIT, 60 by default).
NSYS_TOKEN_DIR=${NSYS_TOKEN_DIR:-/var/log/nsys}
NSYS_WORKERS=${NSYS_WORKERS:-0}
NSYS_START_WAIT=${NSYS_START_WAIT:-60}

start_profiler() {
  local qid=$1 w waited
  for w in $NSYS_WORKERS; do
    touch "$NSYS_TOKEN_DIR/.nsys_start_token_w${w}_${qid}"
  done
  for w in $NSYS_WORKERS; do
    waited=0
    while [ ! -f "$NSYS_TOKEN_DIR/.nsys_started_token_w${w}_${qid}" ]; do
      if [ "$waited" -ge $((NSYS_START_WAIT * 10)) ]; then
        echo "start_profiler: nsys did not start on worker $w for query $qid within ${NSYS_START_WAIT}s" >&2
        return 1
      fi
      sleep 0.1
      waited=$((waited + 1))
    done
  done
}

stop_profiler() {
  local qid=$1 w
  for w in $NSYS_WORKERS; do
    touch "$NSYS_TOKEN_DIR/.nsys_stop_token_w${w}_${qid}"
  done
}
