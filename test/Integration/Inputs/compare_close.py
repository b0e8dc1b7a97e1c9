"""Checks that two output directories hold the same .npy results within a
relative tolerance: compare_close.py A B [--rtol R]. Used to compare the
compute=fast lowering against the scalar compute=loops reference: the two
sum in different orders, so results agree to rounding, not bit for bit."""
import argparse
import os
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()
    names = sorted(n for n in os.listdir(args.a) if n.endswith(".npy"))
    if not names or sorted(n for n in os.listdir(args.b) if n.endswith(".npy")) != names:
        print("FAIL: different or no result files")
        sys.exit(1)
    bad = []
    for n in names:
        x = np.load(os.path.join(args.a, n)).astype(np.float64)
        y = np.load(os.path.join(args.b, n)).astype(np.float64)
        scale = max(float(np.abs(y).max()) if y.size else 0.0, 1e-30)
        err = float(np.abs(x - y).max()) if y.size else 0.0
        if x.shape != y.shape or not np.isfinite(x).all() or err > args.rtol * scale:
            bad.append(n)
            print(f"DIFFERENT {n}: max abs err {err:.3e}, max|ref| {scale:.3e}")
    print(f"{'CLOSE' if not bad else 'FAIL'}: {len(names) - len(bad)} of {len(names)} results within rtol {args.rtol}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
