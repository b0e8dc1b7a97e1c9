"""Read fsdp-run's sharded checkpoints and convert them to full arrays.

A checkpoint is a directory `step-<K>` that `fsdp-run --save DIR` writes:
`metadata.json` (names, dtypes, global shapes, layouts, the step count and
mesh, and per shard its file, byte range, CRC-32 and the global indices it
holds) and one `rank-<R>.bin` per rank (docs/RUNTIME.md).

  python -m fsdp_mlir.checkpoint to-npy CKPT OUTDIR
      one `<name>.npy` per tensor, full (unsharded) arrays
  python -m fsdp_mlir.checkpoint to-torch CKPT FILE
      a torch `state_dict` (name -> tensor) saved with torch.save; the
      step count is stored under `_fsdp_step` (needs torch)
  python -m fsdp_mlir.checkpoint info CKPT

CKPT is a step directory or a --save directory (its newest complete step).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import zlib

import numpy as np

FORMAT = "fsdp-run-checkpoint"
VERSION = 1
# bf16 travels as raw 16-bit words ("<u2"), as in fsdp-run's .npy files.
DTYPES = {
    "<f4": np.float32,
    "<f8": np.float64,
    "<f2": np.float16,
    "<u2": np.uint16,
    "<i4": np.int32,
    "<i8": np.int64,
    "|u1": np.uint8,
}


class CheckpointError(Exception):
    """A checkpoint that cannot be read (missing, truncated or corrupt)."""


def step_dir(path: str) -> str:
    """`path` when it holds metadata.json, else its newest complete step-<K>."""
    if os.path.exists(os.path.join(path, "metadata.json")):
        return path
    if not os.path.isdir(path):
        raise CheckpointError(f"{path} is not a directory")
    best = None
    for name in os.listdir(path):
        m = re.fullmatch(r"step-(\d+)", name)
        if m and os.path.exists(os.path.join(path, name, "metadata.json")):
            k = int(m.group(1))
            if best is None or k > best[0]:
                best = (k, os.path.join(path, name))
    if best is None:
        raise CheckpointError(f"{path} holds no complete checkpoint")
    return best[1]


def read_metadata(path: str) -> dict:
    with open(os.path.join(path, "metadata.json")) as f:
        meta = json.load(f)
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an fsdp-run checkpoint")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: unsupported version {meta.get('version')}")
    return meta


def _shard(path: str, tensor: dict, shard: dict, cache: dict) -> np.ndarray:
    name = shard["file"]
    if "/" in name or name.startswith("."):
        raise CheckpointError(f"{path}: bad shard file name {name!r}")
    if name not in cache:
        with open(os.path.join(path, name), "rb") as f:
            cache[name] = f.read()
    data = cache[name]
    begin, size = shard["offset"], shard["bytes"]
    if begin + size > len(data):
        raise CheckpointError(
            f"{path}: shard file {name} is truncated: it holds {len(data)} bytes, "
            f"the shard of '{tensor['name']}' ends at byte {begin + size}"
        )
    raw = data[begin : begin + size]
    if zlib.crc32(raw) != shard["crc32"]:
        raise CheckpointError(
            f"{path}: shard file {name} is corrupt: the CRC-32 of '{tensor['name']}' does not match"
        )
    dtype = np.dtype(DTYPES[tensor["dtype"]])
    slot = tuple(shard["slot_shape"])
    if size != int(np.prod(slot, dtype=np.int64)) * dtype.itemsize:
        raise CheckpointError(
            f"{path}: the shard of '{tensor['name']}' in {name} has the wrong size"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(slot)


def load(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """Every tensor of a checkpoint as a full array, and its metadata."""
    path = step_dir(path)
    meta = read_metadata(path)
    cache: dict[str, bytes] = {}
    arrays = {}
    for t in meta["tensors"]:
        if t["dtype"] not in DTYPES:
            raise CheckpointError(f"{path}: '{t['name']}' has unsupported dtype {t['dtype']}")
        full = np.zeros(tuple(t["global_shape"]), DTYPES[t["dtype"]])
        for s in t["shards"]:
            slot = _shard(path, t, s, cache)
            index = [
                np.concatenate([np.arange(b, e) for b, e in dim]).astype(np.int64)
                if dim
                else np.zeros(0, np.int64)
                for dim in s["index"]
            ]
            owned = slot[tuple(slice(0, len(i)) for i in index)]
            if full.ndim == 0:
                full[()] = owned
            else:
                full[np.ix_(*index)] = owned
        arrays[t["name"]] = full
    return arrays, meta


def to_npy(path: str, out: str) -> list[str]:
    arrays, _ = load(path)
    os.makedirs(out, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
    return sorted(arrays)


def to_torch(path: str, out: str) -> list[str]:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - depends on the install
        raise CheckpointError("to-torch needs torch (pip install torch)") from e
    arrays, meta = load(path)
    state = {}
    for name, a in arrays.items():
        dtype = next(t["dtype"] for t in meta["tensors"] if t["name"] == name)
        if dtype == "<u2":  # bf16 words
            state[name] = torch.from_numpy(a.astype(np.int16).copy()).view(torch.bfloat16)
        else:
            state[name] = torch.from_numpy(np.array(a))
    state["_fsdp_step"] = meta["step"]
    torch.save(state, out)
    return sorted(arrays)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m fsdp_mlir.checkpoint",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("to-npy", help="write one full <name>.npy per tensor")
    a.add_argument("checkpoint")
    a.add_argument("out")
    b = sub.add_parser("to-torch", help="write a torch state_dict file")
    b.add_argument("checkpoint")
    b.add_argument("out")
    c = sub.add_parser("info", help="print the step, mesh and tensors")
    c.add_argument("checkpoint")
    args = p.parse_args(argv)
    try:
        if args.command == "info":
            path = step_dir(args.checkpoint)
            meta = read_metadata(path)
            print(
                f"{path}: step {meta['step']}, mesh {meta['mesh']['shape']} {meta['mesh']['axes']}"
            )
            for t in meta["tensors"]:
                print(
                    f"  {t['name']}: {t['dtype']} {t['global_shape']} {t['layout']} "
                    f"({len(t['shards'])} shard(s))"
                )
            return 0
        names = (to_npy if args.command == "to-npy" else to_torch)(args.checkpoint, args.out)
        print(f"wrote {len(names)} tensor(s) to {args.out}")
        return 0
    except (CheckpointError, OSError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
