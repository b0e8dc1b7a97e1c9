"""check_plan.py RUN.json [--after-first ONE.json] [--not-above MALLOC.json]:
the static memory plan (arena + what stays outside) equals every rank's
measured high-water mark of a `fsdp-run --json` run; with --after-first, the
run allocated nothing fresh after the first step (its allocations equal
those of a one-step run of the same step); with --not-above, the plan is no
higher than the measured peak of the same step lowered with arena=false
(malloc/free)."""

import json
import sys


def main():
    with open(sys.argv[1]) as f:
        run = json.load(f)
    plan = run["plan"]
    measured = run["measured_peak_bytes"]
    if any(m != plan["peak_bytes"] for m in measured):
        print(f"FAIL: plan {plan} but measured peaks {measured}")
        sys.exit(1)
    if run["jit_arena_bytes"] != [plan["arena_bytes"]] * len(measured):
        print(f"FAIL: arenas {run['jit_arena_bytes']}, plan {plan}")
        sys.exit(1)
    print(
        f"PLAN MATCHES: {plan['peak_bytes']} B per rank "
        f"(arena {plan['arena_bytes']} B + outside {plan['outside_bytes']} B)"
    )
    if "--not-above" in sys.argv:
        with open(sys.argv[sys.argv.index("--not-above") + 1]) as f:
            malloc = max(json.load(f)["measured_peak_bytes"])
        if plan["peak_bytes"] > malloc:
            print(f"FAIL: plan {plan['peak_bytes']} B above malloc's peak {malloc} B")
            sys.exit(1)
        print(f"NOT ABOVE MALLOC: {plan['peak_bytes']} B <= {malloc} B")
    if "--after-first" in sys.argv:
        with open(sys.argv[sys.argv.index("--after-first") + 1]) as f:
            one = json.load(f)
        if run["jit_allocations"] != one["jit_allocations"]:
            print(
                f"FAIL: {run['steps']} steps allocated {run['jit_allocations']}, "
                f"one step {one['jit_allocations']}"
            )
            sys.exit(1)
        print(
            f"NO ALLOCATION AFTER STEP 1: {run['steps']} steps, "
            f"{one['jit_allocations'][0]} allocations (all in step 1)"
        )


if __name__ == "__main__":
    main()
