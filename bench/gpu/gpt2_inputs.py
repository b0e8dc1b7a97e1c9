"""GPT-2 small's inputs and reference, made on the GPU machine (its 124M
fp32 parameters, 500 MB, do not fit in the 64 MiB pack).

    python3 bench/gpu/gpt2_inputs.py --model-json steps/gpt2-small/model.json --out DIR

Builds bench/gpu/models.py:gpt2_small (Hugging Face GPT2LMHeadModel, the
same seeds as the export that made the step library), writes every
parameter and the batch as ``DIR/inputs/<name>.npy`` under the names of the
export's model.json (the step's arguments), and torch's own fp32 training
step on the GPU (TF32 off) as ``DIR/reference/loss.npy`` and
``grad.<name>.npy`` (the step's results). Exit status 77 with the reason
when torch, transformers or a GPU is missing (the check reports the GPT-2
rows as skipped), 1 when the model does not fit the model.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-json", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--model", default="gpt2_small", help="the spec of bench/gpu/models.py"
    )
    ap.add_argument("--device", default="cuda", help="cuda (cpu: to check this script)")
    a = ap.parse_args(argv)
    try:
        import numpy as np
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"gpt2_inputs: skipped: {e}", file=sys.stderr)
        return 77
    if a.device == "cuda" and not torch.cuda.is_available():
        print("gpt2_inputs: skipped: no CUDA device", file=sys.stderr)
        return 77
    sys.path.insert(0, HERE)
    import models

    with open(a.model_json) as f:
        desc = json.load(f)
    spec = models.load(a.model)
    module, loss_fn, batch = spec["module"], spec["loss_fn"], spec["batch"]
    own = dict(module.named_parameters())
    names = [p["name"] for p in desc["params"]]
    if sorted(names) != sorted(own) or len(desc["data"]) != len(batch):
        print(f"gpt2_inputs: {a.model} does not fit {a.model_json}", file=sys.stderr)
        return 1
    for p in desc["params"]:
        if list(own[p["name"]].shape) != p["shape"]:
            print(
                f"gpt2_inputs: parameter {p['name']} has another shape", file=sys.stderr
            )
            return 1
    inputs, reference = os.path.join(a.out, "inputs"), os.path.join(a.out, "reference")
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(reference, exist_ok=True)
    for n in names:
        np.save(
            os.path.join(inputs, f"{n}.npy"), own[n].detach().numpy().astype(np.float32)
        )
    npy = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32}
    for d, t in zip(desc["data"], batch):
        np.save(
            os.path.join(inputs, f"{d['name']}.npy"), t.numpy().astype(npy[d["dtype"]])
        )
    # torch's fp32 step on the GPU: the reference the GPU step must match.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    module = module.to(dev)
    loss = loss_fn(module, *[t.to(dev) for t in batch])
    loss.backward()
    np.save(os.path.join(reference, "loss.npy"), np.float32(loss.item()))
    for n, p in module.named_parameters():
        np.save(os.path.join(reference, f"grad.{n}.npy"), p.grad.detach().cpu().numpy())
    print(f"gpt2_inputs: {len(names)} parameters, loss {loss.item():.6f} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
