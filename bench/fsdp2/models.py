"""The 8-rank benchmark's models, as specs of the PyTorch frontend
(`python -m fsdp_mlir.torch export bench/fsdp2/models.py:gpt128x8 --mesh 8`).

Each spec names its FSDP units (`units`): FSDP2's `fully_shard` is applied to
the submodules the frontend's export makes units, so both sides shard the
same groups of parameters.
"""

import torch
from fsdp_mlir.torch.examples import GPT, MLP, Block, lm_loss, mse_loss
from torch import nn


def _mlp(widths, global_batch):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(global_batch, widths[0], generator=g)
    y = torch.randn(global_batch, widths[-1], generator=g)
    return {
        "module": MLP(widths),
        "loss_fn": mse_loss,
        "batch": (x, y),
        "units": [nn.Linear],
    }


def mlp512x8():
    """MLP 512-512-512-512, global batch 1024 (128 per rank on 8 ranks)."""
    return _mlp((512, 512, 512, 512), 1024)


def mlp_smoke():
    """A small MLP for the smoke run (2 ranks)."""
    return _mlp((16, 24, 8), 8)


def gpt128x8():
    """2-block GPT, D=128, T=32, V=256, 4 heads, global batch 64 (8 per rank)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (64, 32), generator=g)
    targets = torch.randint(0, 256, (64, 32), generator=g)
    return {
        "module": GPT(vocab=256, seq=32, dim=128, heads=4, ffn=512, blocks=2),
        "loss_fn": lm_loss,
        "batch": (tokens, targets),
        "units": [Block],
    }


def _gpt(vocab, seq, dim, heads, ffn, blocks, global_batch):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, vocab, (global_batch, seq), generator=g)
    targets = torch.randint(0, vocab, (global_batch, seq), generator=g)
    return {
        "module": GPT(
            vocab=vocab, seq=seq, dim=dim, heads=heads, ffn=ffn, blocks=blocks
        ),
        "loss_fn": lm_loss,
        "batch": (tokens, targets),
        "units": [Block],
    }


def gpt256x8():
    """2-block GPT, D=256, T=64, V=512, 4 heads, 16 sequences per rank on 8."""
    return _gpt(512, 64, 256, 4, 1024, 2, 128)


def gpt512x8():
    """4-block GPT, D=512, T=128, V=2048, 8 heads, 2 sequences per rank on 8."""
    return _gpt(2048, 128, 512, 8, 2048, 4, 16)


def _hf_lm_loss(model, tokens):
    return model(input_ids=tokens, labels=tokens).loss


def gpt2_small():
    """Hugging Face GPT2LMHeadModel, the GPT-2 small config (124M
    parameters), 1 x 128 tokens per rank on 2 ranks (needs transformers)."""
    import transformers
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    tokens = torch.randint(0, 50257, (2, 128), generator=g)
    return {
        "module": model,
        "loss_fn": _hf_lm_loss,
        "batch": (tokens,),
        "units": [GPT2Block],
    }


# Tensor parallelism (bench/fsdp2/tp.py): a Hugging Face Llama, random
# init, for a data-parallel size `dp` (the global batch is `samples`
# sequences per data-parallel rank; every rank of the tensor-parallel axis
# reads its data-parallel rank's).
LLAMA_SIZES = {
    # 2 layers, hidden 256, 4 heads of 64, SwiGLU 768, vocab 1024, 256 tokens.
    "llama256": {
        "hidden": 256,
        "layers": 2,
        "heads": 4,
        "ffn": 768,
        "vocab": 1024,
        "seq": 256,
    },
    # The smoke run's: 1 layer, hidden 32, 2 heads, 16 tokens.
    "llama_smoke": {
        "hidden": 32,
        "layers": 1,
        "heads": 2,
        "ffn": 64,
        "vocab": 64,
        "seq": 16,
    },
}


def llama_tp(size, dp, samples=1):
    """LlamaForCausalLM of LLAMA_SIZES[size] (float32, eval mode: no
    dropout) and a global batch of dp * samples random sequences."""
    import transformers
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    c = LLAMA_SIZES[size]
    config = transformers.LlamaConfig(
        vocab_size=c["vocab"],
        hidden_size=c["hidden"],
        intermediate_size=c["ffn"],
        num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"],
        num_key_value_heads=c["heads"],
        max_position_embeddings=c["seq"],
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, c["vocab"], (dp * samples, c["seq"]), generator=g)
    return {
        "module": model,
        "loss_fn": _hf_lm_loss,
        "batch": (tokens,),
        "units": [LlamaDecoderLayer],
    }


# Specs that run on their own number of ranks (the others take --world).
WORLD = {"gpt2_small": 2}
