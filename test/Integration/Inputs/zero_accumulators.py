"""Writes zero gradient accumulators for the first micro-step:
zero_accumulators.py DATA OUT writes OUT/accum.grad.<p>.npy for every
parameter p listed in DATA/model.json."""
import json
import os
import sys

import numpy as np


def main():
    data, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(data, "model.json")) as f:
        model = json.load(f)
    for name in [p["name"] for p in model["params"]]:
        ref = np.load(os.path.join(data, name + ".npy"))
        np.save(os.path.join(out, f"accum.grad.{name}.npy"), np.zeros_like(ref))


if __name__ == "__main__":
    main()
