#!/usr/bin/env python3
"""Writes a synthetic folded profile of STACKS distinct stacks to stdout,
shaped like a real one: each stack is the one before with a few leaf frames
popped and a few pushed (a random walk over a call tree, 5 to 60 frames
deep), so neighbours share most of their frames, as real stacks do; names
come from FUNCS functions (C++-like, some long), the popular ones more
often, and a frame now and then calls back into one already on the stack
(recursion). Counts are cpu-clock periods (multiples of 10,101,010 ns).
Deterministic for given arguments.

    python3 benches/gen-big-folded.py STACKS [FUNCS] > big.folded
"""
import random
import sys


def main():
    stacks = int(sys.argv[1])
    funcs = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    rng = random.Random(59)
    names = []
    for i in range(funcs):
        kind = i % 4
        if kind == 0:
            names.append(f"fn_{i}")
        elif kind == 1:
            names.append(f"engine::exec::Operator{i}::run(engine::Chunk&)")
        elif kind == 2:
            names.append(f"std::vector<int, std::allocator<int> >::helper_{i}")
        else:
            names.append(f"lib{i % 97}.so`sym_{i}")
    path = ["app", "main"]
    seen = set()
    out = sys.stdout
    while len(seen) < stacks:
        pop = min(len(path) - 2, 1 + int(rng.expovariate(0.6)))
        del path[len(path) - pop:]
        push = 1 + int(rng.expovariate(0.6))
        if len(path) + push > 60:
            push = max(0, 60 - len(path))
        if len(path) < 5:
            push = max(push, 5 - len(path))
        for _ in range(push):
            if len(path) > 4 and rng.random() < 0.03:
                path.append(path[rng.randrange(2, len(path))])  # recursion
            else:
                # Popular functions (small index) more often.
                path.append(names[int(funcs * rng.random() ** 3)])
        key = ";".join(path)
        if key in seen or len(path) < 3:
            continue
        seen.add(key)
        out.write(f"{key} {10101010 * (1 + int(rng.expovariate(0.3)))}\n")


if __name__ == "__main__":
    main()
