"""Checks quantized parameter all-gathers against the numpy/ml_dtypes model.

    check_quantized.py inputs MODEL.mlir OUTDIR
        Random global inputs for every fsdp.name'd f32 argument of MODEL
        (rows of very different magnitudes, zeros and a -0).
    check_quantized.py gathered DATA OUT WORLD FORMAT SPEC... [--dtype bf16]
                       [--stats FILE]
        Every rank's gathered copy `copy.NAME.rank<r>.npy` of each parameter
        must equal, bit for bit, what runtime/test/quant/quant_ref.py predicts: each
        group rank's padded slot quantized and dequantized in FORMAT (one
        amax over the whole group for the per-tensor formats and NVFP4), then
        unpacked. A parameter whose slot does not block in FORMAT must arrive
        unquantized (bit-identical). SPEC is NAME:DIM:K[:balanced] (Shard(DIM)
        over a group of K ranks, ceil policy unless balanced). Prints each
        parameter's largest difference from the unquantized input.
        --dtype bf16: the gather ran in bf16 (param-dtype=bf16).
        --stats: fsdp-run --print-comm-stats output; every rank it lists must
        have sent exactly the bytes the formats predict (quantized shards, the
        4-byte amax all-reduce, unquantized slots).
    check_quantized.py wire-bytes IR.mlir
        Sums, per function, the bytes one rank sends in its all-gathers
        (quantized ones from their fsdp.wire_bytes, which must equal the
        model's formula, plus the amax all-reduce) and compares them with the
        same gathers unquantized.
"""
import argparse
import os
import pathlib
import re
import sys

import ml_dtypes as mld
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "runtime", "test", "quant"))
import quant_ref as Q

PER_TENSOR = {"fp8_e4m3_tensor": Q.E4M3, "fp8_e5m2_tensor": Q.E5M2}
GROUP_AMAX = {"fp8_e4m3_tensor", "fp8_e5m2_tensor", "nvfp4", "nvfp4_2d"}
FORMATS = ["fp8_e4m3_tensor", "fp8_e5m2_tensor", "mxfp8_rowwise",
           "mxfp8_colwise", "nvfp4", "fp8_block_1x128", "fp8_block_128x128",
           "nvfp4_2d", "fp8_block_1x128_t"]


def blocks(fmt, rows, cols):
    """Whether a [rows, cols] shard can be quantized in fmt."""
    if fmt == "mxfp8_rowwise":
        return cols % 32 == 0
    if fmt == "mxfp8_colwise":
        return rows % 32 == 0
    if fmt in ("nvfp4", "nvfp4_2d"):
        return cols % 16 == 0
    return True


def roundtrip(fmt, x, amax):
    """Dequantize(quantize(x)) for x [rows, cols] (float32 or bfloat16)."""
    rows, cols = x.shape
    if fmt in PER_TENSOR:
        kind = PER_TENSOR[fmt]
        q, scale_inv = Q.fp8_tensor_quantize(x, amax, kind)
        y = Q.fp8_tensor_dequantize(q, kind, scale_inv)
    elif fmt.startswith("mxfp8"):
        colwise = fmt == "mxfp8_colwise"
        q, e = Q.mxfp8_quantize(x, colwise)
        y = Q.mxfp8_dequantize(q, e, rows, cols, colwise)
    elif fmt in ("nvfp4", "nvfp4_2d"):
        packed, sb = Q.nvfp4_quantize(x, amax, 16 if fmt == "nvfp4_2d" else 1)
        y = Q.nvfp4_dequantize(packed, sb, rows, cols, amax)
    else:
        block_rows = 128 if fmt == "fp8_block_128x128" else 1
        q, scale_inv = Q.fp8_block_quantize(x, block_rows)
        y = Q.fp8_block_dequantize(q, scale_inv, rows, cols, block_rows)
    return np.asarray(y, dtype=np.float32).reshape(rows, cols)


def extents(n, k, policy):
    """(start, size) of every group rank's rows of a dim of n."""
    if policy == "balanced":
        b, r = n // k, n % k
        return [(j * b + min(j, r), b + (j < r)) for j in range(k)]
    c = -(-n // k)
    return [(min(j * c, n), max(0, min((j + 1) * c, n) - j * c)) for j in range(k)]


def slot_view(shape):
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    return rows, int(shape[-1])


def expected_gather(full, dim, k, policy, fmt, bf16):
    """(gathered tensor, quantized?) as every rank of the group sees it."""
    n = full.shape[dim]
    c = -(-n // k)
    ext = extents(n, k, policy)
    x = full.astype(mld.bfloat16) if bf16 else full
    slots = []
    for start, size in ext:
        piece = np.take(x, np.arange(start, start + size), axis=dim)
        pad = [(0, 0)] * x.ndim
        pad[dim] = (0, c - size)
        slots.append(np.pad(piece, pad))
    slot_shape = slots[0].shape
    rows, cols = slot_view(slot_shape)
    quantized = blocks(fmt, rows, cols)
    amax = max(Q.amax(s) for s in slots)
    pieces = []
    for s, (_, size) in zip(slots, ext):
        if quantized:
            y = roundtrip(fmt, s.reshape(rows, cols), amax).reshape(slot_shape)
            if bf16:  # the runtime writes bf16 (round to nearest even)
                y = y.astype(mld.bfloat16)
        else:
            y = s
        pieces.append(np.take(y, np.arange(size), axis=dim))
    gathered = np.concatenate(pieces, axis=dim).astype(np.float32)
    return gathered, quantized, (rows, cols)


def cmd_inputs(args):
    text = pathlib.Path(args.model).read_text()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(1)
    for shape, attrs in re.findall(r"%\w+: tensor<([0-9x]*)x?f32> \{([^}]*)\}", text):
        name = re.search(r'fsdp.name = "([^"]+)"', attrs).group(1)
        dims = [int(d) for d in shape.split("x") if d]
        # Rows of very different magnitudes: per-tensor scales lose the
        # small rows, block scales keep them.
        scale = np.exp2(rng.uniform(-10, 10, (dims[0],) + (1,) * (len(dims) - 1)))
        a = (rng.standard_normal(dims) * scale).astype(np.float32)
        flat = a.reshape(-1)
        flat[: min(40, flat.size)] = 0.0
        flat[0] = -0.0
        np.save(os.path.join(args.out, name + ".npy"), a)


def read_stats(path):
    sent = {}
    for m in re.finditer(r"rank (\d+): .* sent (\d+) B", pathlib.Path(path).read_text()):
        sent[int(m.group(1))] = int(m.group(2))
    return sent


def cmd_gathered(args):
    fmt, bf16 = args.format, args.dtype == "bf16"
    if fmt not in FORMATS:
        sys.exit(f"unknown format {fmt}")
    bad, per_rank_bytes = 0, 0
    for spec in args.specs:
        parts = spec.split(":")
        name, dim, k = parts[0], int(parts[1]), int(parts[2])
        policy = parts[3] if len(parts) > 3 else "ceil"
        full = np.load(f"{args.data}/{name}.npy")
        want, quantized, (rows, cols) = expected_gather(full, dim, k, policy, fmt, bf16)
        count = rows * cols
        if quantized:
            per_rank_bytes += Q.wire_bytes(fmt, (rows, cols))
            per_rank_bytes += 4 if fmt in GROUP_AMAX else 0
        else:
            per_rank_bytes += count * (2 if bf16 else 4)
        mismatched = []
        for r in range(args.world):
            got = np.load(f"{args.out}/copy.{name}.rank{r}.npy")
            if got.shape != want.shape or got.view(np.uint32).tobytes() != want.view(
                    np.uint32).tobytes():
                mismatched.append(r)
        got = np.load(f"{args.out}/copy.{name}.rank0.npy").astype(np.float64)
        ref_max = float(np.max(np.abs(full)))
        err = float(np.max(np.abs(got - full))) if got.shape == full.shape else np.inf
        state = f"quantized [{rows}, {cols}]" if quantized else f"unquantized [{rows}, {cols}]"
        print(f"{name}: {state}: max |gathered - input| = {err:.4g} "
              f"({err / ref_max if ref_max else 0:.3g} of max |input|)")
        if mismatched:
            got = np.load(f"{args.out}/copy.{name}.rank{mismatched[0]}.npy")
            diff = np.flatnonzero(got.reshape(-1).view(np.uint32) != want.reshape(-1).view(
                np.uint32)) if got.shape == want.shape else []
            where = f", first differing element {diff[0]}" if len(diff) else ""
            print(f"MISMATCH {name}: ranks {mismatched} differ from the "
                  f"model{where}")
            bad += 1
    if args.stats:
        sent = read_stats(args.stats)  # mpi: rank 0 only
        if not sent:
            print("MISMATCH stats: no rank reported")
            bad += 1
        for r, b in sorted(sent.items()):
            if b != per_rank_bytes:
                print(f"MISMATCH stats: rank {r} sent {b} B, formats predict {per_rank_bytes} B")
                bad += 1
        print(f"bytes sent per rank: {per_rank_bytes}")
    verdict = "PASS" if bad == 0 else "FAIL"
    print(f"{verdict}: {fmt}: {len(args.specs)} parameters x {args.world} ranks "
          f"bit-identical to the model")
    sys.exit(1 if bad else 0)


ELEM_BYTES = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8}
QUANT = re.compile(r"fsdp\.quantized_all_gather .* format (\w+) shape \[(\d+), (\d+)\]"
                   r" \{([^}]*)\} : tensor<(\d+)x(\w+)>")
PLAIN = re.compile(r"fsdp\.all_gather(?:_start)? .*: tensor<(\d+)x(\w+)> ->")


def cmd_wire_bytes(args):
    bad = 0
    funcs = re.split(r"\bfunc\.func ", pathlib.Path(args.ir).read_text())[1:]
    for body in funcs:
        fname = re.match(r"\w*\s*@([\w.]+)", body).group(1)
        quantized = plain = amax = unquantized_equiv = 0
        nq = np_ = 0
        per_format = {}
        for m in QUANT.finditer(body):
            fmt, rows, cols, attrs = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
            count, elem = int(m.group(5)), m.group(6)
            wb = re.search(r"fsdp\.wire_bytes = (\d+)", attrs)
            expect = Q.wire_bytes(fmt, (rows, cols))
            if not wb or int(wb.group(1)) != expect:
                print(f"MISMATCH @{fname}: {fmt} [{rows}, {cols}]: fsdp.wire_bytes "
                      f"{wb.group(1) if wb else 'missing'}, formula {expect}")
                bad += 1
            quantized += expect
            amax += 4 if fmt in GROUP_AMAX else 0
            unquantized_equiv += count * ELEM_BYTES[elem]
            per_format[fmt] = per_format.get(fmt, 0) + 1
            nq += 1
        for m in PLAIN.finditer(body):
            plain += int(m.group(1)) * ELEM_BYTES[m.group(2)]
            np_ += 1
        if nq + np_ == 0:
            continue
        total = quantized + amax + plain
        baseline = unquantized_equiv + plain
        formats = ",".join(sorted(per_format)) or "none"
        print(f"@{fname}: {nq} quantized ({formats}) + {np_} plain all-gathers: "
              f"{total} B sent per rank per step (quantized {quantized} B + amax "
              f"{amax} B + plain {plain} B); unquantized {baseline} B; "
              f"ratio {total / baseline:.4f}")
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("inputs")
    p.add_argument("model")
    p.add_argument("out")
    p.set_defaults(fn=cmd_inputs)
    p = sub.add_parser("gathered")
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("world", type=int)
    p.add_argument("format")
    p.add_argument("specs", nargs="+")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--stats")
    p.set_defaults(fn=cmd_gathered)
    p = sub.add_parser("wire-bytes")
    p.add_argument("ir")
    p.set_defaults(fn=cmd_wire_bytes)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
