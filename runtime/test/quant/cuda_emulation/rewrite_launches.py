"""Rewrites the <<<...>>> kernel launches of a .cu file into calls of the
host emulation in cuda_runtime.h (next to this script):

    kernel<T, true><<<grid, threads, 0, s>>>(args);
 -> cuda_emulation::launch(COOP, cuda_emulation::LaunchConfig(grid, threads, 0, s), kernel<T, true>, args);

Kernels that synchronize threads run cooperatively (one host thread per CUDA
thread); the rest run their threads in a loop.

    python rewrite_launches.py in.cu out.cpp
"""

import re
import sys

COOPERATIVE = ("amaxKernel", "block128QuantKernel", "mxfp8RowQuantKernel",
               "nvfp4Quant2dKernel", "block1x128QuantKernel",
               "attnFwdKernel", "attnDeltaKernel", "attnBwdKVKernel",
               "attnBwdQKernel", "attnMmaFwdKernel", "attnMmaBwdKVKernel",
               "attnMmaBwdQKernel", "bitonicTileKernel",
               "groupedRowsKernel", "groupedTransposeKernel")
LAUNCH = re.compile(r"([A-Za-z_]\w*(?:\s*<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(", re.S)


def rewrite(text):
    def repl(m):
        kernel, cfg = m.group(1), " ".join(m.group(2).split())
        coop = "true" if kernel.split("<")[0].strip() in COOPERATIVE else "false"
        return (f"cuda_emulation::launch({coop}, cuda_emulation::LaunchConfig({cfg}), "
                f"{kernel}, ")
    out, count = LAUNCH.subn(repl, text)
    if count == 0:
        raise SystemExit("no kernel launches found")
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(f"// Generated from {src} by rewrite_launches.py; do not edit.\n")
        f.write(rewrite(text))


if __name__ == "__main__":
    main()
