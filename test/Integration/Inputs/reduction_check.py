"""Checks the split reductions of gpu-reductions-step.mlir against float64
numpy: reduction_check.py make DATA writes the inputs (seeded);
reduction_check.py check DATA OUT [OUT2] compares OUT with the reference
and, given OUT2 (a second run), checks that both runs are bit-identical.

A result may differ from the exact value by the rounding of its summation
tree: at most depth x u x sum(|terms|) (u = 2^-24 for float32, 2^-53 for
float64), depth being the longest chain of additions. One output over x:
9 elements per lane in a warp's segment, 5 shuffle levels, 128 partials per
lane in pass 2, 5 levels, the initial value (147; a sequential sum would be
2^20). The column sum: 9 rows per chunk, 57 of its 1,824 partials per lane,
5 levels, the initial value (72; sequentially 16,411). The integer
reductions (a count, a sum, a max) are exact."""
import os
import sys

import numpy as np

U32 = 2.0**-24
U64 = 2.0**-53
ROW_DEPTH = 9 + 5 + 128 + 5 + 1
COLUMN_DEPTH = 9 + 57 + 5 + 1


def make(data):
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(30)
    np.save(os.path.join(data, "x.npy"), rng.standard_normal(2**20 + 7).astype(np.float32))
    np.save(os.path.join(data, "m.npy"), rng.standard_normal((16411, 64)).astype(np.float32))
    # Large enough that a sum wraps nowhere but no partial fits 32 bits.
    np.save(os.path.join(data, "k.npy"), rng.integers(-(2**40), 2**40, 2**20 + 7, dtype=np.int64))


def check(data, out, again=None):
    x = np.load(os.path.join(data, "x.npy")).astype(np.float64)
    m = np.load(os.path.join(data, "m.npy")).astype(np.float64)
    k = np.load(os.path.join(data, "k.npy"))
    cases = {
        "sumsq": (np.sum(x * x), ROW_DEPTH * U64 * np.sum(x * x)),
        "sum": (np.sum(x), ROW_DEPTH * U32 * np.sum(np.abs(x))),
        "max": (np.max(x), 0.0),
        "colsum": (m.sum(axis=0), COLUMN_DEPTH * U32 * np.abs(m).sum(axis=0)),
    }
    exact = {"count": np.sum(x > 0), "isum": np.sum(k), "imax": np.max(k)}
    ok = True
    for name, (ref, bound) in cases.items():
        got = np.load(os.path.join(out, name + ".npy"))
        err = np.abs(got.astype(np.float64) - ref)
        good = bool(np.all(err <= bound))
        ok &= good
        print(f"{name} {got.dtype} {'ok' if good else 'FAIL'}: error {float(np.max(err)):.3g} <= {float(np.max(bound)):.3g}")
        if again is not None:
            same = np.load(os.path.join(again, name + ".npy")).tobytes() == got.tobytes()
            ok &= same
            print(f"{name} {'bit-identical' if same else 'DIFFERENT'} in two runs")
    for name, ref in exact.items():
        got = np.load(os.path.join(out, name + ".npy"))
        good = got.dtype == np.int64 and int(got) == int(ref)
        ok &= good
        print(f"{name} {got.dtype} {'ok' if good else 'FAIL'}: {int(got)} (exact {int(ref)})")
        if again is not None:
            same = np.load(os.path.join(again, name + ".npy")).tobytes() == got.tobytes()
            ok &= same
            print(f"{name} {'bit-identical' if same else 'DIFFERENT'} in two runs")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
        sys.exit(0)
    sys.exit(check(*sys.argv[2:]))
