# A Python worker with two known hot functions (tests/jit.rs): `alpha` and
# `beta` share the time; `python3.12 -X perf hot.py SECONDS`.
import sys
import time


def alpha(n):
    s = 0
    for i in range(n):
        s = (s + ((i * 31) ^ (s >> 3))) & 0xFFFFFFFF
    return s


def beta(n):
    s = 1
    for i in range(n):
        s = (s * 1103515245 + i) & 0xFFFFFFFF
        s ^= s >> 17
    return s


end = time.time() + float(sys.argv[1])
acc = 0
print("started", flush=True)
while time.time() < end:
    acc = (acc + alpha(20000) + beta(20000)) & 0xFFFFFFFF
print(acc)
