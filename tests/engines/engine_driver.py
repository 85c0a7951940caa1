"""The capture loop the engine workers of tests/engines.rs share: waits for
the jobprof-record sidecar to be ready, then runs each query in its own
capture window (`jobprof-record start/stop --query qN`, asked of the test's
driver: a line on stdout, `ok` back on stdin; run by the driver outside this
process, as a job's benchmark driver runs beside the engine), repeating it
until the window has lasted SECONDS, and shuts the sidecar down.

usage (through an engine's script): SCRIPT READY SECONDS
"""
import os
import sys
import time

# Every engine runs on a pool of this many threads.
THREADS = 4


def run(queries):
    """queries: [(name, callable)] in order, one capture window each."""
    ready, seconds = sys.argv[1:3]
    deadline = time.time() + 300
    while not os.path.exists(ready):
        if time.time() > deadline:
            sys.exit("the sidecar never became ready")
        time.sleep(0.02)

    def driver(*args):
        print(*args, flush=True)
        answer = sys.stdin.readline()
        if answer != "ok\n":
            sys.exit(f"the driver failed {' '.join(args)}: {answer!r}")

    for name, query in queries:
        query()  # warm: the first run loads code and fills caches
        driver("start", "--query", name)
        end = time.time() + float(seconds)
        while time.time() < end:
            query()
        driver("stop", "--query", name)
    driver("shutdown")
