"""Runs fsdp-run with x.npy replaced by hand-made .npy files.

npy_cases.py LOWERED GOOD_DIR WORK -- FSDP_RUN...

FSDP_RUN... is the command that runs fsdp-run, one or more words (under
`lit --param fsdp_aot=1` a script that runs it twice). For every case,
writes WORK/<case>/x.npy (from GOOD_DIR/x.npy), runs
FSDP_RUN... LOWERED --inputs WORK/<case> --inputs GOOD_DIR and prints
"<case>: exit <status>: <first error line>", and for a run that succeeds
whether its y equals the y of the unmodified inputs ("same y").
"""

import os
import struct
import subprocess
import sys

import numpy as np


def npy(header, data, version=1, length=None):
    """A .npy file with a literal header dict (padded as numpy pads it)."""
    size_field = 2 if version == 1 else 4
    head = header.encode("latin1")
    pad = (64 - (6 + 2 + size_field + len(head) + 1) % 64) % 64
    head += b" " * pad + b"\n"
    length = len(head) if length is None else length
    fmt = "<H" if version == 1 else "<I"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, length) + head + data


def cases(x):
    c_bytes = x.astype("<f4").tobytes()
    f_bytes = np.asfortranarray(x).astype("<f4").tobytes(order="F")
    rows, cols = x.shape
    std = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}"
    return {
        # numpy's own variants: all read, same y
        "v1": npy(std, c_bytes),
        "v2": npy(std, c_bytes, version=2),
        "v3": npy(std, c_bytes, version=3),
        "keys-reordered-no-trailing-comma": npy(
            f"{{'shape': ({rows}, {cols}), 'descr': '<f4', 'fortran_order': False}}",
            c_bytes,
        ),
        "fortran-last-key": npy(
            f"{{'descr': '<f4', 'shape': ({rows}, {cols}), 'fortran_order': True}}",
            f_bytes,
        ),
        # malformed: a clear error, nothing allocated first
        "negative-shape": npy(std.replace(f"({rows},", f"(-{rows},"), c_bytes),
        "nonnumeric-shape": npy(std.replace(f"({rows},", "('a',"), c_bytes),
        "shape-20-digits": npy(
            std.replace(f"({rows},", "(12345678901234567890,"), c_bytes
        ),
        "huge-shape-2^40": npy(std.replace(f"({rows},", f"({2**40},"), c_bytes),
        "shape-overflows": npy(
            std.replace(f"({rows}, {cols})", f"({2**32}, {2**32})"), c_bytes
        ),
        "descr-negative-size": npy(std.replace("<f4", "<f-4"), c_bytes),
        "descr-big-endian": npy(std.replace("<f4", ">f4"), c_bytes),
        "header-length-4GiB": npy(std, c_bytes, version=2, length=2**32 - 16),
        "version-4": npy(std, c_bytes, version=4),
        "truncated-data": npy(std, c_bytes[:-4]),
        "trailing-bytes": npy(std, c_bytes + b"\0\0\0\0"),
        "missing-key": npy(f"{{'descr': '<f4', 'shape': ({rows}, {cols}), }}", c_bytes),
        "repeated-key": npy(std.replace("}", "'descr': '<f4', }"), c_bytes),
        "not-a-dict": npy(f"[{rows}, {cols}]", c_bytes),
        "not-npy": b"P6\n" + c_bytes,
    }


def main():
    split = sys.argv.index("--")
    lowered, good, work = sys.argv[1:split]
    fsdp_run = sys.argv[split + 1 :]
    x = np.load(os.path.join(good, "x.npy"))
    ref = os.path.join(work, "out-reference")
    subprocess.run(fsdp_run + [lowered, "--inputs", good, "--outputs", ref], check=True)
    y_ref = np.load(os.path.join(ref, "y.npy"))
    for name, data in cases(x).items():
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "x.npy"), "wb") as f:
            f.write(data)
        out = os.path.join(work, "out-" + name)
        run = subprocess.run(
            fsdp_run + [lowered, "--inputs", d, "--inputs", good, "--outputs", out],
            check=False,
            capture_output=True,
            text=True,
        )
        first = next((ln for ln in run.stderr.splitlines() if "error" in ln), "")
        line = f"{name}: exit {run.returncode}: {first}"
        if run.returncode == 0:
            same = np.array_equal(np.load(os.path.join(out, "y.npy")), y_ref)
            line += "same y" if same else "DIFFERENT y"
        print(line)


if __name__ == "__main__":
    main()
