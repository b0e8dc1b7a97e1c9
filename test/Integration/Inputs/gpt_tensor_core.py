"""The frontend's tiny GPT (fsdp_mlir.torch.examples) with head dims the
tensor-core attention kernels take: `gpt_head128`, 2 heads of 128 (dim
256), causal; `gpt_masked_head64`, 2 heads of 64 (dim 128) under an
additive padding mask (gpt_head16's MaskedBlock). 2 sequences of 70 tokens:
more than one 64-row tile, and not a multiple of it."""

import os
import sys

import torch
from fsdp_mlir.torch import examples

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_head16 import MaskedBlock, MaskedGPT

SEQ = 70


def gpt_head128(global_batch: int = 2, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = examples.GPT(seq=SEQ, dim=256, heads=2, ffn=128, blocks=1)
    tokens = torch.randint(0, 32, (global_batch, SEQ))
    targets = torch.roll(tokens, -1, dims=1)
    return {"module": model, "loss_fn": examples.lm_loss, "batch": (tokens, targets),
            "units": [examples.Block]}


def gpt_masked_head64(global_batch: int = 2, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = MaskedGPT(seq=SEQ, dim=128, heads=2, ffn=128, blocks=1)
    model.blocks = torch.nn.ModuleList([MaskedBlock(128, 2, 128)])
    tokens = torch.randint(1, 32, (global_batch, SEQ))
    tokens[:, 61:] = 0  # padding: the last keys hidden from every query
    targets = torch.roll(tokens, -1, dims=1)
    return {"module": model, "loss_fn": examples.lm_loss, "batch": (tokens, targets),
            "units": [MaskedBlock]}
