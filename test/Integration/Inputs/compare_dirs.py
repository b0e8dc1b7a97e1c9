"""Checks that two output directories hold bit-identical .npy files:
compare_dirs.py A B. Bucketing and scheduling move the same bytes and reduce
in the same rank order, so the results must not change at all."""
import os
import sys

import numpy as np


def main():
    a, b = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(a) if n.endswith(".npy"))
    if sorted(n for n in os.listdir(b) if n.endswith(".npy")) != names:
        print("FAIL: different result files")
        sys.exit(1)
    bad = [n for n in names
           if np.load(os.path.join(a, n)).tobytes() != np.load(os.path.join(b, n)).tobytes()]
    for n in bad:
        print(f"DIFFERENT {n}")
    print(f"{'IDENTICAL' if not bad else 'FAIL'}: {len(names) - len(bad)} of {len(names)} results bit-identical")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
