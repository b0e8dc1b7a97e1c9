"""Checks that every rank's gathered copy of every parameter is bit-identical
to the global input: check_gathered.py DATA OUT WORLD NAME..."""
import sys

import numpy as np


def main():
    data, out, world, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    bad = 0
    for name in names:
        ref = np.load(f"{data}/{name}.npy")
        for r in range(world):
            got = np.load(f"{out}/copy.{name}.rank{r}.npy")
            if got.shape != ref.shape or got.tobytes() != ref.tobytes():
                print(f"MISMATCH {name} rank {r}")
                bad += 1
    print(f"{'PASS' if bad == 0 else 'FAIL'}: {len(names)} parameters x {world} ranks bit-identical")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
