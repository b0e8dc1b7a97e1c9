"""Writes random global inputs for every argument of a step, by fsdp.name.

Usage: make_inputs.py MODEL.mlir OUTDIR [--world W]
Arguments with a layout get their global type (the full tensor); the others
get the global batch (dim 0 times the world size).
"""
import argparse
import os
import pathlib
import re

import numpy as np

ARG = re.compile(r"%\w+: tensor<([0-9x]*)x?f32> \{([^}]*)\}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--world", type=int, default=1)
    args = ap.parse_args()
    text = pathlib.Path(args.model).read_text()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)
    for shape, attrs in ARG.findall(text):
        name = re.search(r'fsdp.name = "([^"]+)"', attrs).group(1)
        dims = [int(d) for d in shape.split("x") if d]
        if "fsdp.layout" not in attrs:
            dims[0] *= args.world
        # Include a negative zero and values of many magnitudes: the gather
        # must move bits, not arithmetic.
        a = (rng.standard_normal(dims) * 10.0 ** rng.integers(-6, 6, dims))
        a = a.astype(np.float32)
        a.reshape(-1)[0] = -0.0
        np.save(os.path.join(args.out, name + ".npy"), a)


if __name__ == "__main__":
    main()
