"""The frontend's tiny GPT (fsdp_mlir.torch.examples) with 2 heads of 16
(dim 32), a head dim the fused attention kernels have; 4 sequences of 16
tokens; `gpt_masked`: the same under an additive padding mask instead of
is_causal."""

import torch
import torch.nn.functional as F
from fsdp_mlir.torch import examples


class MaskedBlock(examples.Block):
    """Attention under an additive key mask computed from the tokens: keys
    holding token 0 get -inf (a padding mask, [batch, 1, 1, T]), every key a
    small bias."""

    def attn(self, x, tokens):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        pad = (tokens == 0)[:, None, None, :]
        bias = torch.where(pad, float("-inf"), 0.1 * tokens[:, None, None, :].float())
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.proj(o.transpose(1, 2).reshape(b, s, d))

    def forward(self, x, tokens):
        x = x + self.attn(self.ln1(x), tokens)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class MaskedGPT(examples.GPT):
    def forward(self, tokens):
        h = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            h = block(h, tokens)
        return self.head(self.ln_f(h))


def gpt(global_batch: int = 4, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = examples.GPT(heads=2)
    tokens = torch.randint(0, 32, (global_batch, 16))
    targets = torch.roll(tokens, -1, dims=1)
    return {"module": model, "loss_fn": examples.lm_loss, "batch": (tokens, targets),
            "units": [examples.Block]}


def gpt_masked(global_batch: int = 4, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    model = MaskedGPT(heads=2)
    model.blocks = torch.nn.ModuleList(MaskedBlock(32, 2, 64) for _ in range(2))
    tokens = torch.randint(1, 32, (global_batch, 16))
    tokens[:, 13:] = 0  # padding: the last keys hidden from every query
    targets = torch.roll(tokens, -1, dims=1)
    return {"module": model, "loss_fn": examples.lm_loss, "batch": (tokens, targets),
            "units": [MaskedBlock]}
