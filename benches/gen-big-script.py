#!/usr/bin/env python3
"""Synthetic `perf script` text for the pprof and timeline measurements
(benches/pprof-timeline.sh): the demo capture's real samples repeated to
TARGET_MB megabytes, times shifted so the window grows copy by copy, spread
over THREADS thread ids, and with STACKS distinct stacks (a leaf frame
`work_N` added per sample, N cycling). Written to stdout.

    python3 benches/gen-big-script.py TARGET_MB THREADS STACKS < demo.txt
"""
import re
import sys

target = int(sys.argv[1]) << 20
threads = int(sys.argv[2])
stacks = int(sys.argv[3])
samples = [s for s in sys.stdin.read().split("\n\n") if s.strip()]
head = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\.(\d+):(.*)$")
parsed = []
t_first = None
for s in samples:
    first, rest = s.split("\n", 1)
    m = head.match(first)
    t = int(m.group(3)) * 10**6 + int(m.group(4))
    t_first = t if t_first is None else min(t_first, t)
    parsed.append((m.group(1), t, m.group(5), rest))
span = max(p[1] for p in parsed) - t_first + 20_000
out = sys.stdout
written = 0
copy = 0
i = 0
while written < target:
    for comm, t, tail, rest in parsed:
        us = t - t_first + copy * span + 1_000_000_000
        tid = 10_000 + i % threads
        leaf = f"\t            1000 work_{i % stacks}+0x0 (/opt/jobprof-demo/demo_worker)\n"
        text = f"{comm} {tid:5} {us // 10**6:5}.{us % 10**6:06}:{tail}\n{leaf}{rest}\n\n"
        out.write(text)
        written += len(text)
        i += 1
        if written >= target:
            break
    copy += 1
