"""Decompositions applied while tracing, on top of torch-mlir's own table.

torch-mlir lowers the scatter-based backward of `nn.Embedding` and of
`F.cross_entropy` / `F.nll_loss` (`aten.index_put`, `aten.scatter`) to
`tm_tensor.scatter`, an op of its own dialect that upstream MLIR cannot parse.
The replacements here express the same gradients with a one-hot matrix
(`indices == arange(n)`), which imports as upstream `linalg.generic` and
`linalg.matmul`: O(N * n) work instead of O(N), exact in floating point (each
one-hot product adds zeros or the value itself).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

# torch.nn._reduction values
_REDUCTION_MEAN = 1


class UnsupportedInModel(RuntimeError):
    """A feature of an op that the decompositions here do not cover."""


def _one_hot(indices: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """(..., n) float tensor with a 1 where indices[...] == column."""
    cols = torch.arange(n, dtype=indices.dtype, device=indices.device)
    return (indices.unsqueeze(-1) == cols).to(dtype)


def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """d(weight) of `embedding(weight, indices)`: one_hot(indices)^T @ grad."""
    if scale_grad_by_freq:
        raise UnsupportedInModel(
            "aten.embedding_dense_backward with scale_grad_by_freq=True is not supported"
        )
    flat = indices.reshape(-1)
    one_hot = _one_hot(flat, num_weights, grad_output.dtype)
    if padding_idx is not None and padding_idx >= 0:
        one_hot = one_hot * (flat != padding_idx).unsqueeze(-1).to(grad_output.dtype)
    tail = tuple(grad_output.shape[indices.dim() :])
    grad = grad_output.reshape(flat.shape[0], -1)
    return (one_hot.t() @ grad).reshape((num_weights,) + tail)


def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """d(input) of `nll_loss(input, target)`: -one_hot(target) * grad, with the
    weight, `ignore_index` and mean reduction handled as aten does."""
    channel_dim = 0 if self.dim() < 2 else 1
    if reduction == _REDUCTION_MEAN:
        grad_output = grad_output / total_weight
    if self.dim() == 1 and target.dim() > 0:
        target = target[0]
    valid = target != ignore_index
    safe = torch.where(valid, target, torch.zeros_like(target))
    grad_input = -_one_hot(safe, self.shape[channel_dim], self.dtype)
    if grad_output.dim() > 0:  # reduction='none': one value per row
        grad_output = grad_output.unsqueeze(-1)
    if weight is not None:
        grad_output = grad_output * weight
    grad_output = torch.where(valid.unsqueeze(-1), grad_output, torch.zeros_like(grad_output))
    return grad_input * grad_output


def nll_loss2d_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    """Same for (N, C, H, W) inputs: move the class dim last and reuse the above."""
    n, c = self.shape[0], self.shape[1]
    flat_self = self.movedim(1, -1).reshape(-1, c)
    flat_target = target.reshape(-1)
    if grad_output.dim() > 0:
        grad_output = grad_output.reshape(-1)
    grad = nll_loss_backward(
        grad_output, flat_self, flat_target, weight, reduction, ignore_index, total_weight
    )
    return grad.reshape(n, *self.shape[2:], c).movedim(-1, 1)


def _pair(v):
    return (v[0], v[-1]) if isinstance(v, (list, tuple)) and v else (v, v)


def avg_pool2d_backward(
    grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
):
    """d(input) of avg_pool2d as grad_output (N*C, Ho*Wo) @ P, where P[o, i] is
    1/divisor when input pixel i lies in output window o (built from aranges
    with the CPU kernel's window and divisor rules), so the import is
    elementwise linalg and a linalg.matmul (torch-mlir has no lowering of the
    op itself)."""
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride) if stride else (kh, kw)
    ph, pw = _pair(padding)
    h, w = self.shape[-2], self.shape[-1]
    ho, wo = grad_output.shape[-2], grad_output.shape[-1]
    dtype = grad_output.dtype

    def windows(n_out, n_in, k, st, pad):
        start = torch.arange(n_out) * st - pad
        end = torch.clamp(start + k, max=n_in + pad)
        first, last = torch.clamp(start, min=0), torch.clamp(end, max=n_in)
        pos = torch.arange(n_in)
        inside = (pos.unsqueeze(0) >= first.unsqueeze(1)) & (pos.unsqueeze(0) < last.unsqueeze(1))
        size = (end - start) if count_include_pad else (last - first)
        return inside.to(dtype), size.to(dtype)

    in_h, size_h = windows(ho, h, kh, sh, ph)
    in_w, size_w = windows(wo, w, kw, sw, pw)
    pool = in_h.reshape(ho, 1, h, 1) * in_w.reshape(1, wo, 1, w)
    if divisor_override:
        pool = pool / divisor_override
    else:
        pool = pool / (size_h.reshape(ho, 1, 1, 1) * size_w.reshape(1, wo, 1, 1))
    lead = tuple(grad_output.shape[:-2])
    grad = grad_output.reshape(-1, ho * wo) @ pool.reshape(ho * wo, h * w)
    return grad.reshape(lead + (h, w))


def max_pool2d_with_indices_backward(
    grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    """d(input) of max_pool2d: each output's gradient goes to the input pixel
    its index names, as a sum over one-hot rows (indices are flat H*W offsets)."""
    h, w = self.shape[-2], self.shape[-1]
    lead = tuple(self.shape[:-2])
    flat_idx = indices.reshape(lead + (-1,))
    flat_grad = grad_output.reshape(lead + (-1,))
    one_hot = _one_hot(flat_idx, h * w, grad_output.dtype)
    grad = (flat_grad.unsqueeze(-1) * one_hot).sum(-2)
    return grad.reshape(lead + (h, w))


# sqrt(2/pi) and 1/sqrt(2) as torch's CPU kernels compute them (M_SQRT2 *
# M_2_SQRTPI * 0.5 and M_SQRT1_2); torch-mlir's own lowering of aten.gelu
# with approximate="tanh" uses 0.797724, which is off in the fourth digit.
GELU_TANH_BETA = 0.7978845608028654
GELU_TANH_KAPPA = 0.044715
GELU_ERF_ALPHA = 0.7071067811865476


def gelu(x, approximate="none"):
    """aten.gelu in elementwise ops, in the order of torch's CPU kernel, with
    the exact constants (erf form: x/2 (1 + erf(x / sqrt 2)); tanh form:
    x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))))."""
    if approximate == "tanh":
        inner = GELU_TANH_BETA * (x + GELU_TANH_KAPPA * (x * x * x))
        return 0.5 * x * (1.0 + torch.tanh(inner))
    if approximate != "none":
        raise UnsupportedInModel(f"aten.gelu with approximate={approximate!r} is not supported")
    return x * 0.5 * (1.0 + torch.erf(x * GELU_ERF_ALPHA))


def cumsum(x, dim, dtype=None):
    """aten.cumsum as a masked sum: out[..., i] = sum_j x[..., j] * (j <= i),
    O(n^2) along `dim` (torch-mlir lowers cumsum to its own tm_tensor.scan,
    which upstream MLIR cannot parse). Exact for integers (positions from an
    attention mask); for floats the sum runs in another order than torch's."""
    if dtype is not None:
        x = x.to(dtype)
    elif not x.is_floating_point():
        x = x.to(torch.int64)  # torch promotes integer and bool cumsums to int64
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    moved = x.movedim(dim, -1)
    n = moved.shape[-1]
    pos = torch.arange(n, device=x.device)
    keep = (pos.unsqueeze(0) <= pos.unsqueeze(1)).to(moved.dtype)  # [i, j]: j <= i
    out = (moved.unsqueeze(-2) * keep).sum(-1)
    return out.movedim(-1, dim)


def constant_pad_nd(x, pad, value=0):
    """aten.constant_pad_nd with negative amounts (the backward of a pad) as
    a slice, then the non-negative padding: torch-mlir turns negative amounts
    into a tensor.pad with negative low/high, which upstream MLIR rejects.
    Non-negative pads are left to torch-mlir (NotImplemented)."""
    if all(p >= 0 for p in pad):
        return NotImplemented
    out = x
    for k in range(len(pad) // 2):
        dim = x.dim() - 1 - k
        lo, hi = pad[2 * k], pad[2 * k + 1]
        start = -lo if lo < 0 else 0
        stop = out.shape[dim] + hi if hi < 0 else out.shape[dim]
        out = out.narrow(dim, start, stop - start)
    rest = [max(p, 0) for p in pad]
    if any(rest):
        out = aten.constant_pad_nd.default(out, rest, value)
    return out.clone() if out is x else out


def _dense(x, size, stride, offset) -> bool:
    """Whether as_strided(x, size, stride, offset) reads all of a contiguous
    x in order (the strides of size-1 dims do not matter)."""
    import math

    if (offset or 0) != 0 or not x.is_contiguous() or x.numel() != math.prod(size):
        return False
    expect = 1
    for n, st in reversed(list(zip(size, stride))):
        if n != 1 and st != expect:
            return False
        expect *= n
    return True


def as_strided(x, size, stride, storage_offset=None):
    """aten.as_strided that reads a contiguous tensor in order (restriding a
    reduction's keepdim result, as adaptive average pooling does) as a
    reshape: torch-mlir lowers as_strided through an index tensor and a
    literal it cannot legalize. Other cases are left to torch-mlir."""
    if _dense(x, size, stride, storage_offset):
        return x.reshape(size)
    return NotImplemented


def as_strided_scatter(x, src, size, stride, storage_offset=None):
    """aten.as_strided_scatter that overwrites all of a contiguous tensor in
    order: the source, reshaped. Other cases are left to torch-mlir."""
    if _dense(x, size, stride, storage_offset) and src.dtype == x.dtype:
        return src.reshape(x.shape).clone()
    return NotImplemented


def index_put(x, indices, values, accumulate=False):
    """aten.index_put with accumulate=True and one index tensor on dim 0 (the
    backward of `table[index]`, e.g. Swin's relative position bias) as
    x + one_hot(index)^T @ values, like the embedding backward (torch-mlir
    emits tm_tensor.scatter). Other forms are left to torch-mlir."""
    if (
        not accumulate
        or len(indices) != 1
        or indices[0] is None
        or indices[0].dtype == torch.bool
        or not x.is_floating_point()
    ):
        return NotImplemented
    n = x.shape[0]
    flat = indices[0].reshape(-1)
    flat = torch.where(flat < 0, flat + n, flat)
    vals = values.expand(tuple(indices[0].shape) + tuple(x.shape[1:])).reshape(flat.shape[0], -1)
    one_hot = _one_hot(flat, n, x.dtype)
    return x + (one_hot.t() @ vals.to(x.dtype)).reshape(x.shape)


# aten op -> replacement, applied on top of torch-mlir's table while tracing.
# Tests remove entries to check that the export's self-check (verify) catches
# what they fix.
OVERRIDES = {
    aten.avg_pool2d_backward.default: avg_pool2d_backward,
    aten.max_pool2d_with_indices_backward.default: max_pool2d_with_indices_backward,
    aten.embedding_dense_backward.default: embedding_dense_backward,
    aten.nll_loss_backward.default: nll_loss_backward,
    aten.nll_loss2d_backward.default: nll_loss2d_backward,
    aten.gelu.default: gelu,
    aten.cumsum.default: cumsum,
    aten.constant_pad_nd.default: constant_pad_nd,
    aten.as_strided.default: as_strided,
    aten.as_strided_scatter.default: as_strided_scatter,
    aten.index_put.default: index_put,
    aten._unsafe_index_put.default: index_put,
}


def table() -> dict:
    """torch-mlir's decomposition table with the replacements above."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    ops = get_decomposition_table()
    ops.update(OVERRIDES)
    ops[aten.scaled_dot_product_attention.default] = scaled_dot_product_attention
    return ops


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """softmax(q k^T * scale + mask) v in plain ops, so autograd differentiates
    the math (the fused CPU kernel's backward has no lowering)."""
    if dropout_p != 0.0:
        raise UnsupportedInModel(
            "aten.scaled_dot_product_attention with dropout_p != 0 is not supported"
        )
    if enable_gqa:
        raise UnsupportedInModel(
            "aten.scaled_dot_product_attention with enable_gqa=True is not supported"
        )
    lq, lk = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / (query.shape[-1] ** 0.5)
    scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(lq, lk, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value


# ---------------------------------------------------------------- batch norm


def batch_norm_functional(x, running_mean, running_var, weight, bias, training, momentum, eps):
    """(output, new running mean, new running var) of `F.batch_norm` in plain
    ops, so that autograd differentiates them (torch-mlir cannot lower the
    eval-mode `native_batch_norm_backward`, and the training-mode op updates
    its running statistics in place). Training mode normalizes by the batch's
    statistics (biased variance) and updates the running ones as aten does:
    `(1 - momentum) * running + momentum * batch`, the variance unbiased
    (n / (n - 1)); eval mode normalizes by the running statistics."""
    c = x.shape[1]
    dims = [0] + list(range(2, x.dim()))
    shape = [1, c] + [1] * (x.dim() - 2)
    new_mean = new_var = None
    if training or running_mean is None:
        mean = x.mean(dims, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dims, keepdim=True)
        out = centered * torch.rsqrt(var + eps)
        if training and running_mean is not None:
            n = x.numel() // c
            if momentum is None:
                raise UnsupportedInModel(
                    "batch norm with momentum=None (a cumulative average over "
                    "num_batches_tracked) is not supported"
                )
            batch_mean = mean.detach().reshape(c)
            batch_var = var.detach().reshape(c) * (n / max(n - 1, 1))
            new_mean = (1 - momentum) * running_mean + momentum * batch_mean
            new_var = (1 - momentum) * running_var + momentum * batch_var
    else:
        out = (x - running_mean.reshape(shape)) * torch.rsqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out, new_mean, new_var


def _pair2(v):
    return tuple(v) * (2 // len(v)) if isinstance(v, (list, tuple)) else (v, v)


def grouped_conv2d(x, weight, bias, stride, padding, dilation, groups):
    """`F.conv2d` with groups > 1 in ops torch-mlir lowers (its grouped
    convolution and backward emit an invalid tensor.collapse_shape): a
    depthwise convolution (groups == input channels) as a sum over the kernel
    taps of strided slices of the padded input times the tap's weights; other
    groupings as one groups=1 convolution per group, concatenated."""
    sh, sw = _pair2(stride)
    dh, dw = _pair2(dilation)
    kh, kw = weight.shape[-2], weight.shape[-1]
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        else:  # "same" (stride 1): torch pads the extra element at the end
            th, tw = dh * (kh - 1), dw * (kw - 1)
            x = torch.nn.functional.pad(x, (tw // 2, tw - tw // 2, th // 2, th - th // 2))
            padding = (0, 0)
    ph, pw = _pair2(padding)
    c = x.shape[1]
    if groups != c:
        xs = x.chunk(groups, dim=1)
        ws = weight.chunk(groups, dim=0)
        bs = bias.chunk(groups) if bias is not None else [None] * groups
        return torch.cat(
            [
                torch.nn.functional.conv2d(xi, wi, bi, (sh, sw), (ph, pw), (dh, dw), 1)
                for xi, wi, bi in zip(xs, ws, bs)
            ],
            dim=1,
        )
    mult = weight.shape[0] // c
    if mult > 1:  # output channel o reads input channel o // mult
        x = x.repeat_interleave(mult, dim=1)
    if ph or pw:
        x = torch.nn.functional.pad(x, (pw, pw, ph, ph))
    h, w = x.shape[-2], x.shape[-1]
    ho = (h - dh * (kh - 1) - 1) // sh + 1
    wo = (w - dw * (kw - 1) - 1) // sw + 1
    out = None
    for i in range(kh):
        for j in range(kw):
            tap = x[
                :,
                :,
                i * dh : i * dh + (ho - 1) * sh + 1 : sh,
                j * dw : j * dw + (wo - 1) * sw + 1 : sw,
            ] * weight[:, 0, i, j].reshape(1, -1, 1, 1)
            out = tap if out is None else out + tap
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out


class BufferUpdates(torch.overrides.TorchFunctionMode):
    """While tracing, replaces `F.batch_norm` (and `torch.batch_norm`) by
    `batch_norm_functional` and records the new running statistics of the
    buffers it is given: {buffer name: new value}. `buffers` maps the buffer
    tensors the module is called with to their names. Grouped 2-D
    convolutions are replaced by `grouped_conv2d`."""

    def __init__(self, buffers: dict):
        super().__init__()
        self.names = {id(t): n for n, t in buffers.items()}
        self.updates = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.batch_norm:
            return self._batch_norm(*args, **kwargs)
        if func is torch.batch_norm:
            x, w, b, rm, rv, training, momentum, eps = args[:8]
            return self._batch_norm(x, rm, rv, w, b, training, momentum, eps)
        if func is torch.conv2d:
            conv = dict(
                zip(("input", "weight", "bias", "stride", "padding", "dilation", "groups"), args)
            )
            conv.update(kwargs)
            if conv.get("groups", 1) > 1:
                return grouped_conv2d(
                    conv["input"],
                    conv["weight"],
                    conv.get("bias"),
                    conv.get("stride", 1),
                    conv.get("padding", 0),
                    conv.get("dilation", 1),
                    conv["groups"],
                )
        return func(*args, **kwargs)

    def _batch_norm(
        self,
        x,
        running_mean,
        running_var,
        weight=None,
        bias=None,
        training=False,
        momentum=0.1,
        eps=1e-5,
    ):
        # A module called twice in one forward sees its first update, as in eager.
        given = (running_mean, running_var)
        running_mean, running_var = (
            self.updates.get(self.names.get(id(t)), t) if t is not None else None for t in given
        )
        out, new_mean, new_var = batch_norm_functional(
            x, running_mean, running_var, weight, bias, training, momentum, eps
        )
        for t, new in zip(given, (new_mean, new_var)):
            if new is not None:
                name = self.names.get(id(t))
                if name is None:
                    raise UnsupportedInModel(
                        "batch norm in training mode with running statistics that are not "
                        "buffers of the module (register them with register_buffer)"
                    )
                self.updates[name] = new
        return out
