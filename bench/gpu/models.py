"""The PyTorch models of the GPU check's end-to-end stage (docs/AOT.md).

Each function is a spec of the PyTorch frontend (``python -m fsdp_mlir.torch
export bench/gpu/models.py:gpt256``, what bench/gpu/pack_aot.py does here)
and, on the GPU machine, the same module and batch for torch eager and
torch.compile (bench/gpu/torch_baseline.py) and for GPT-2's inputs
(bench/gpu/gpt2_inputs.py). Every model and batch comes from fixed seeds.
Only torch is needed (and transformers for GPT-2): the frontend's example
models are loaded from their file, without the frontend (torch-mlir).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def _examples():
    name = "_fsdp_gpu_check_examples"
    if name not in sys.modules:
        path = os.path.join(
            HERE, "..", "..", "python", "fsdp_mlir", "torch", "examples.py"
        )
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _gpt(global_batch: int, mesh: str, **shape) -> dict:
    ex = _examples()
    torch.manual_seed(0)
    model = ex.GPT(**shape)
    g = torch.Generator().manual_seed(1)
    vocab, seq = shape.get("vocab", 32), shape.get("seq", 16)
    tokens = torch.randint(0, vocab, (global_batch, seq), generator=g)
    targets = torch.roll(tokens, -1, dims=1)
    return {
        "module": model,
        "loss_fn": ex.lm_loss,
        "batch": (tokens, targets),
        "units": [ex.Block],
        "mesh": mesh,
    }


def gpt():
    """The frontend's example GPT (2 blocks, D=32, T=16, V=32), 8 sequences,
    one rank."""
    return _gpt(8, "1")


def gpt_2ranks():
    """The same GPT on 2 ranks with the same work per rank (16 sequences):
    its step time minus gpt()'s is the communication it exposes."""
    return _gpt(16, "2")


GPT256 = {"vocab": 512, "seq": 64, "dim": 256, "heads": 4, "ffn": 1024, "blocks": 2}


def gpt256():
    """A GPT where the device's time is more than launches (2 blocks, D=256,
    T=64, V=512, 1.9M parameters), 8 sequences, one rank."""
    return _gpt(8, "1", **GPT256)


def gpt256_2ranks():
    return _gpt(16, "2", **GPT256)


def hf_lm_loss(model, tokens):
    return model(input_ids=tokens, labels=tokens).loss


def gpt2_small(batch: int = 8, seq: int = 1024):
    """Hugging Face GPT-2 small (124M parameters, 12 layers, D=768,
    V=50257), random init from seed 0, eval mode (no dropout), 8 x 1024
    tokens from seed 1, one rank."""
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 50257, (batch, seq), generator=g)
    return {
        "module": model,
        "loss_fn": hf_lm_loss,
        "batch": (tokens,),
        "units": [type(model.transformer.h[0])],
        "mesh": "1",
    }


def load(name: str) -> dict:
    """A spec by name (the functions above)."""
    fn = globals().get(name)
    if not callable(fn) or name.startswith("_") or name == "load":
        raise KeyError(f"bench/gpu/models.py has no model '{name}'")
    return fn()


def gpt2_tiny():
    """GPT-2's architecture at a small size (2 layers, D=64, V=128, 2 x 32
    tokens): pack_aot.py exports it traced both ways to check that fake
    tensors give the same MLIR."""
    import transformers

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=64,
        n_head=4,
        vocab_size=128,
        n_positions=64,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 128, (2, 32), generator=g)
    return {
        "module": model,
        "loss_fn": hf_lm_loss,
        "batch": (tokens,),
        "units": [type(model.transformer.h[0])],
        "mesh": "1",
    }
