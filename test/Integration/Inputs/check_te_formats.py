"""Checks a direct fsdprt_jit_quantized_all_gather in nvfp4_2d or
fp8_block_1x128_t against the numpy/ml_dtypes model, bit for bit.

    check_te_formats.py X.npy OUTDIR FORMAT ROWS COLS

X.npy holds the ranks' slots one after another (fsdp-run gives rank r the
r-th [ROWS * COLS] piece); OUTDIR/y.rank<r>.npy is every rank's gathered
result, which must be each slot quantized and dequantized in FORMAT (one amax
over the group for nvfp4_2d), concatenated.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "runtime", "test", "quant"))
import quant_ref as Q


def main():
    x_path, out, fmt, rows, cols = sys.argv[1:6]
    rows, cols = int(rows), int(cols)
    x = np.load(x_path).astype(np.float32)
    world = x.size // (rows * cols)
    slots = x.reshape(world, rows, cols)
    expect = []
    for s in slots:
        if fmt == "nvfp4_2d":
            amax = Q.amax(x)
            q, sb = Q.nvfp4_quantize(s, amax, tile_rows=16)
            expect.append(Q.nvfp4_dequantize(q, sb, rows, cols, amax))
        else:
            q, si = Q.fp8_block_quantize(s, 1, transposed_scales=True)
            expect.append(Q.fp8_block_dequantize(q, si, rows, cols, 1,
                                                 transposed_scales=True))
    expect = np.concatenate([e.reshape(-1) for e in expect]).astype(np.float32)
    for r in range(world):
        got = np.load(os.path.join(out, f"y.rank{r}.npy")).reshape(-1)
        bad = np.nonzero(got.view(np.uint32) != expect.view(np.uint32))[0]
        if bad.size:
            print(f"FAIL: rank {r}: {bad.size} of {got.size} values differ, "
                  f"first [{bad[0]}] {got[bad[0]]!r} vs {expect[bad[0]]!r}")
            return 1
    # The magnitudes differ by 2^3 per 128 elements, so an fp8 block scale
    # read from the wrong block would show (nvfp4_2d's 16-row tiles span all
    # of a slot's rows, so its small rows round to zero).
    if fmt == "fp8_block_1x128_t":
        assert np.count_nonzero(expect) > expect.size // 2
    print(f"PASS: {fmt} [{rows}, {cols}] x {world} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
