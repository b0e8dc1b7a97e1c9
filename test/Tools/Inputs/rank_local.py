"""Inputs and checks for rank_local_step.mlir:
rank_local.py inputs DIR STEPS | rank_local.py check DIR OUT STEPS [FIRST]."""
import os
import sys

import numpy as np

mode, d = sys.argv[1], sys.argv[2]
if mode == "inputs":
    steps = int(sys.argv[3])
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "stat.npy"), np.array([1.0, 2.0], np.float32))
    np.save(os.path.join(d, "x.npy"), np.arange(4 * steps, dtype=np.float32).reshape(steps, 2, 2))
    sys.exit(0)
out, steps = sys.argv[3], int(sys.argv[4])
first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
x = np.load(os.path.join(d, "x.npy"))
start = np.array([1.0, 2.0], np.float32)
if first:  # resumed: every rank starts from rank 0's state after `first` steps
    for k in range(first):
        start = (start + x[k, 0]) * np.float32(0.5)
bad = 0
for rank in range(2):
    s = start.copy()
    for k in range(first, first + steps):
        s = (s + x[k, rank]) * np.float32(0.5)
    got = np.load(os.path.join(out, f"stat.rank{rank}.npy"))
    if got.tobytes() != s.tobytes():
        print(f"rank {rank}: {got}, expected {s}")
        bad += 1
if np.load(os.path.join(out, "stat.npy")).tobytes() != np.load(os.path.join(out, "stat.rank0.npy")).tobytes():
    print("stat.npy is not rank 0's copy")
    bad += 1
print("FAIL" if bad else "PASS")
sys.exit(1 if bad else 0)
