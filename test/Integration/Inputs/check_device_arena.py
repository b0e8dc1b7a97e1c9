"""check_device_arena.py ON1.json ON.json OFF1.json OFF.json ON.mlir OFF.mlir:
a compute=gpu step with its device arena (fsdp-assign-buffers, the default,
ON.mlir) against the same step lowered with arena=false (OFF.mlir), each run
for one step (ON1, OFF1) and for more (ON, OFF). Every rank's device arena
is the plan's arena, allocated once; the arena's lowered step allocates no
device memory (its results are planned, the split reductions' partials are
the context's scratch buffer) and the runner allocates nothing after the
first step (the arguments and the training state stay in the buffers the
first step allocated): no device allocation in any step after the first.
Without the arena every step allocates exactly what its lowered step's
`mgpuMemAlloc` calls do."""

import json
import re
import sys


def calls_in(path):
    with open(path) as f:
        return len(re.findall(r"llvm\.call @mgpuMemAlloc\(", f.read()))


def per_step(one, many):
    steps = many["steps"] - one["steps"]
    return [(b - a) / steps for a, b in zip(one["device_allocations"], many["device_allocations"])]


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    on1, on, off1, off = (load(p) for p in sys.argv[1:5])
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
    if calls_on != 0 or any(a != 0 for a in with_arena):
        print(
            f"FAIL: the arena's step makes {calls_on} mgpuMemAlloc calls and "
            f"{with_arena} device allocations per step after the first"
        )
        sys.exit(1)
    if calls_off == 0 or any(a != calls_off for a in without):
        print(
            f"FAIL: arena=false allocates {without} per step, its lowered step "
            f"{calls_off} times"
        )
        sys.exit(1)
    print(
        f"DEVICE ARENA: {plan} B once per rank; 0 device allocations per step "
        f"after the first (arena=false: {calls_off})"
    )


if __name__ == "__main__":
    main()
