"""check_device_arena.py ON1.json ON.json OFF1.json OFF.json ON.mlir OFF.mlir:
a compute=gpu step with its device arena (fsdp-assign-buffers, the default,
ON.mlir) against the same step lowered with arena=false (OFF.mlir), each run
for one step (ON1, OFF1) and for more (ON, OFF). Every rank's device arena
is the plan's arena, allocated once; what a step allocates besides is
exactly the `mgpuMemAlloc` calls the lowered step makes (its results): the
difference between the two lowerings' allocations per step equals the
difference between their calls (the runner's own uploads are the same in
both), and the arena's step makes fewer."""

import json
import re
import sys


def calls_in(path):
    with open(path) as f:
        return len(re.findall(r"llvm\.call @mgpuMemAlloc\(", f.read()))


def per_step(one, many):
    steps = many["steps"] - one["steps"]
    return [(b - a) / steps for a, b in zip(one["device_allocations"], many["device_allocations"])]


def main():
    on1, on, off1, off = (json.load(open(p)) for p in sys.argv[1:5])
    calls_on, calls_off = calls_in(sys.argv[5]), calls_in(sys.argv[6])
    plan = on["plan"]["arena_bytes"]
    for run in (on1, on):
        if plan <= 0 or run["device_arena_bytes"] != [plan] * len(run["device_arena_bytes"]):
            print(f"FAIL: device arenas {run['device_arena_bytes']}, plan {plan} B")
            sys.exit(1)
    if any(a != 0 for a in off["device_arena_bytes"]):
        print(f"FAIL: arena=false made device arenas {off['device_arena_bytes']}")
        sys.exit(1)
    with_arena, without = per_step(on1, on), per_step(off1, off)
    saved = [b - a for a, b in zip(with_arena, without)]
    if not calls_on < calls_off or any(s != calls_off - calls_on for s in saved):
        print(
            f"FAIL: allocations per step {with_arena} with the arena, {without} without; "
            f"the lowered steps make {calls_on} and {calls_off}"
        )
        sys.exit(1)
    print(
        f"DEVICE ARENA: {plan} B once per rank; {calls_on} device allocations per step "
        f"(the results) instead of {calls_off}"
    )


if __name__ == "__main__":
    main()
