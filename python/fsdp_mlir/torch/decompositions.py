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
    """d(weight) of `embedding(weight, indices)`: one_hot(indices)^T @ grad,
    which fsdp-opt's fsdp-one-hot-scatter turns into a scatter-add loop over
    the tokens (O(tokens x width), summed per token in index order as aten's
    CPU kernel does). The padding index becomes -1, which names no row."""
    if scale_grad_by_freq:
        raise UnsupportedInModel(
            "aten.embedding_dense_backward with scale_grad_by_freq=True is not supported"
        )
    flat = indices.reshape(-1)
    if padding_idx is not None and padding_idx >= 0:
        flat = torch.where(flat == padding_idx, torch.full_like(flat, -1), flat)
    one_hot = _one_hot(flat, num_weights, grad_output.dtype)
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
    # sum's own dtype: an int32 cumsum stays int32 (the sum of an integer
    # tensor is int64 otherwise; grouped_mm's offsets must be int32).
    out = (moved.unsqueeze(-2) * keep).sum(-1, dtype=moved.dtype)
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


def index_put_replace(x, indices, values, accumulate=False):
    """aten.index_put without accumulation and one index tensor on dim 0
    (`inv[perm] = arange(n)`): row k takes the values of the LAST position j
    whose index is k, as aten's sequential CPU loop leaves it, and keeps x
    where no index names it. O(len(index) * rows) comparisons and a gather
    (torch-mlir emits tm_tensor.scatter). Other forms are left to torch-mlir."""
    if accumulate:
        return index_put(x, indices, values, accumulate)
    if len(indices) != 1 or indices[0] is None or indices[0].dtype == torch.bool:
        return NotImplemented
    n = x.shape[0]
    flat = indices[0].reshape(-1)
    flat = torch.where(flat < 0, flat + n, flat)
    m = flat.shape[0]
    vals = values.expand(tuple(indices[0].shape) + tuple(x.shape[1:])).reshape((m,) + x.shape[1:])
    last, hit = _last_writer(flat, n)
    picked = vals.to(x.dtype)[last]
    hit = hit.reshape((n,) + (1,) * (x.dim() - 1))
    return torch.where(hit, picked, x)


def _last_writer(index: torch.Tensor, n: int):
    """For a 1-D (or batched (..., m)) index into n slots: (j, hit), the last
    position j naming each slot (0 where none does) and whether one does."""
    m = index.shape[-1]
    pos = torch.arange(m, device=index.device)
    slots = torch.arange(n, device=index.device, dtype=index.dtype)
    names = index.unsqueeze(-1) == slots  # (..., m, n)
    j = torch.where(names, pos.unsqueeze(-1), torch.full_like(pos, -1).unsqueeze(-1)).amax(-2)
    return j.clamp(min=0), j >= 0


def _along_last(self, dim, index, src):
    """self, index and src with `dim` moved last; None when index does not
    cover self in the other dims (scatter allows it to be smaller)."""
    dim = dim % max(self.dim(), 1)
    if self.dim() == 0:
        return None
    moved = self.movedim(dim, -1)
    idx = index.movedim(dim, -1)
    if tuple(idx.shape[:-1]) != tuple(moved.shape[:-1]):
        return None
    if src is not None and isinstance(src, torch.Tensor) and src.dim() == self.dim():
        src = src.movedim(dim, -1)[..., : idx.shape[-1]]
        if tuple(src.shape[:-1]) != tuple(moved.shape[:-1]):
            src = src[tuple(slice(0, k) for k in idx.shape[:-1])]
    return dim, moved, idx, src


def scatter(self, dim, index, src, reduce=None):
    """aten.scatter (src or value form): out[..., index[..., j], ...] =
    src[..., j, ...] along `dim`, the last write winning for repeated indices
    as in aten's sequential CPU loop; the rest is self. Through a one-hot
    comparison (O(index x size of dim)) and a gather: torch-mlir lowers
    scatter to tm_tensor.scatter, or crashes on it in a backward (the topk /
    max backward scatters into zeros). `reduce` is left to torch-mlir."""
    if reduce is not None:
        return NotImplemented
    moved = _along_last(self, dim, index, src)
    if moved is None:
        return NotImplemented
    dim, x, idx, src = moved
    n = x.shape[-1]
    idx = torch.where(idx < 0, idx + n, idx)
    last, hit = _last_writer(idx, n)
    if isinstance(src, torch.Tensor) and src.dim() > 0:
        picked = torch.gather(src.to(x.dtype), -1, last)
    else:
        picked = torch.full_like(x, float(src) if x.is_floating_point() else int(src))
    return torch.where(hit, picked, x).movedim(-1, dim)


def scatter_value(self, dim, index, value, reduce=None):
    return scatter(self, dim, index, value, reduce)


def scatter_add(self, dim, index, src):
    """aten.scatter_add: self + the sum of src over the positions whose index
    names each slot along `dim`, as a one-hot product (O(index x size of
    dim)); torch-mlir emits tm_tensor.scatter."""
    moved = _along_last(self, dim, index, src)
    if moved is None:
        return NotImplemented
    dim, x, idx, src = moved
    n = x.shape[-1]
    idx = torch.where(idx < 0, idx + n, idx)
    one_hot = _one_hot(idx, n, x.dtype)  # (..., m, n)
    added = (src.to(x.dtype).unsqueeze(-1) * one_hot).sum(-2)
    return (x + added).movedim(-1, dim)


def index_add(self, dim, index, source, alpha=1):
    """aten.index_add: self + alpha * (rows of source summed into the slots
    `index` names along `dim`), as one_hot(index)^T @ source, the form of the
    embedding backward (torch-mlir emits tm_tensor.scatter)."""
    if not self.is_floating_point():
        return NotImplemented
    dim = dim % max(self.dim(), 1)
    x = self.movedim(dim, 0) if self.dim() else self.reshape(1)
    src = source.movedim(dim, 0) if source.dim() else source.reshape(1)
    n = x.shape[0]
    flat = index.reshape(-1)
    flat = torch.where(flat < 0, flat + n, flat)
    added = (_one_hot(flat, n, x.dtype).t() @ src.reshape(flat.shape[0], -1).to(x.dtype)).reshape(
        x.shape
    )
    if alpha != 1:
        added = added * alpha
    out = x + added
    return out.movedim(0, dim) if self.dim() else out.reshape(())


def _rounded(v, dtype):
    """The python float v rounded to a floating dtype."""
    import numpy as np

    kind = {torch.float32: np.float32, torch.float16: np.float16}.get(dtype, np.float64)
    return float(kind(v))


def histc(x, bins=100, min=0, max=0):
    """aten.histc as aten's CPU kernel bins (linear interpolation, without
    the local search): element e falls in bin trunc((e - min) * bins / (max -
    min)), the maximum in the last bin, elements outside [min, max] nowhere;
    min == max takes the data's range (widened by 1 each way if that is
    empty). Counts as a sum over one-hot rows, O(elements x bins): the
    MoE router's tokens per expert (torch-mlir has no lowering)."""
    flat = x.reshape(-1)
    if min == max:
        lo, hi = flat.min(), flat.max()
        same = lo == hi
        lo, hi = torch.where(same, lo - 1, lo), torch.where(same, hi + 1, hi)
        width = hi - lo
    else:
        # The edges and their difference rounded to x's dtype, as the kernel
        # computes them (python scalars: a tensor constant would be a literal).
        lo, hi = _rounded(min, x.dtype), _rounded(max, x.dtype)
        width = _rounded(_rounded(max, x.dtype) - _rounded(min, x.dtype), x.dtype)
    inside = (flat >= lo) & (flat <= hi)
    pos = ((flat - lo) * bins / width).to(torch.int64)  # truncation, as the C++ cast
    pos = torch.where(pos == bins, pos - 1, pos)
    pos = torch.where(inside, pos, torch.full_like(pos, -1))
    return _one_hot(pos, bins, x.dtype).sum(0)


def _sort_ranks(x, descending):
    """The stable ascending (descending) rank of every element of x along
    its last dim, NaN greatest as in aten's sort: O(n^2) comparisons."""
    a, b = x.unsqueeze(-1), x.unsqueeze(-2)  # [i, j]: x_i against x_j
    if x.is_floating_point():
        nan_a, nan_b = torch.isnan(a), torch.isnan(b)
        before = (b > a) | (nan_b & ~nan_a) if descending else (b < a) | (nan_a & ~nan_b)
        ties = (b == a) | (nan_a & nan_b)
    else:
        before = b > a if descending else b < a
        ties = b == a
    n = x.shape[-1]
    pos = torch.arange(n, device=x.device)
    earlier = pos.unsqueeze(0) < pos.unsqueeze(1)  # [i, j]: j < i
    return (before | (ties & earlier)).sum(-1)  # elements that come before x_i


def sort(x, dim=-1, descending=False):
    """aten.sort as a stable sort by ranks: rank_i = #{j: x_j before x_i} +
    #{j < i: x_j == x_i}; indices[p] = the i of rank p; values gathered.
    O(n^2) along `dim` (torch-mlir lowers sort to tm_tensor.sort). Ties keep
    their order, which is one of the orders aten's unstable sort may give."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    moved = x.movedim(dim, -1)
    n = moved.shape[-1]
    rank = _sort_ranks(moved, descending)  # (..., n)
    pos = torch.arange(n, device=x.device)
    # indices[..., p] = sum_i i * (rank_i == p)
    at = rank.unsqueeze(-2) == pos.unsqueeze(-1)  # [p, i]
    indices = (at.to(torch.int64) * pos).sum(-1)
    values = torch.gather(moved, -1, indices)
    return values.movedim(-1, dim), indices.movedim(-1, dim)


def sort_stable(x, *, stable=None, dim=-1, descending=False):
    return sort(x, dim, descending)


def topk(x, k, dim=-1, largest=True, sorted=True):
    """aten.topk as k rounds of argmax (argmin) with the chosen elements
    masked out: the first index among equal values, as aten's CPU kernel
    gives for distinct ones. O(k x n) along `dim` (torch-mlir lowers topk to
    tm_tensor.topk)."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    moved = x.movedim(dim, -1)
    n = moved.shape[-1]
    fill = float("-inf") if largest else float("inf")
    if not moved.is_floating_point():
        info = torch.iinfo(moved.dtype)
        fill = info.min if largest else info.max
    pos = torch.arange(n, device=x.device)
    work, picks = moved, []
    for _ in range(k):
        i = work.argmax(-1, keepdim=True) if largest else work.argmin(-1, keepdim=True)
        picks.append(i)
        work = torch.where(pos == i, torch.full_like(work, fill), work)
    indices = torch.cat(picks, -1) if picks else moved[..., :0].to(torch.int64)
    values = torch.gather(moved, -1, indices)
    return values.movedim(-1, dim), indices.movedim(-1, dim)


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
    aten.index_put.default: index_put_replace,
    aten._unsafe_index_put.default: index_put_replace,
    aten.scatter.src: scatter,
    aten.scatter.value: scatter_value,
    aten.scatter_add.default: scatter_add,
    aten.index_add.default: index_add,
    aten.histc.default: histc,
    aten.sort.default: sort,
    aten.sort.stable: sort_stable,
    aten.topk.default: topk,
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


def _groups(offs, n):
    """The group of each of n positions along a jagged dim: the number of
    offsets at or below it (offs[g] ends group g); E past offs[-1]."""
    pos = torch.arange(n, device=offs.device, dtype=offs.dtype)
    return (offs.unsqueeze(0) <= pos.unsqueeze(1)).sum(-1)  # (n,), int64


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """`torch._grouped_mm` / `F.grouped_mm` (the MoE experts of transformers'
    default "grouped_mm" implementation) in plain ops that autograd
    differentiates, DENSE: every group's matrix on every row, masked by the
    row's group. For (S, K) rows and (E, K, N) weights that is E times the
    multiply-adds of the grouped product (every expert on every token, E /
    top-k times a sparse MoE's) and an (E, S, N) intermediate. Rows past
    offs[-1] are zero (aten leaves them undefined). aten's kernel has no CPU
    trace through torch-mlir; its offsets are data-dependent."""
    if bias is not None:
        raise UnsupportedInModel("grouped_mm with a bias is not supported")
    if out_dtype is not None and out_dtype != mat_a.dtype:
        raise UnsupportedInModel(f"grouped_mm with out_dtype={out_dtype} is not supported")
    if mat_a.dim() == 3 and mat_b.dim() == 3 and offs is None:
        return torch.bmm(mat_a, mat_b)
    if offs is None:
        raise UnsupportedInModel("grouped_mm of 2-D operands without offsets is not supported")
    e = offs.shape[0]
    zero = torch.zeros((), dtype=mat_a.dtype, device=mat_a.device)
    if mat_a.dim() == 2 and mat_b.dim() == 3:  # rows of a in groups: (S, N)
        group = _groups(offs, mat_a.shape[0])
        mine = group.unsqueeze(0) == torch.arange(e, device=group.device).unsqueeze(1)  # (E, S)
        every = torch.matmul(mat_a.unsqueeze(0), mat_b)  # (E, S, N)
        return torch.where(mine.unsqueeze(-1), every, zero).sum(0)
    if mat_a.dim() == 2 and mat_b.dim() == 2:  # K in groups (a weight gradient): (E, M, N)
        group = _groups(offs, mat_a.shape[1])
        mine = group.unsqueeze(0) == torch.arange(e, device=group.device).unsqueeze(1)  # (E, K)
        return torch.matmul(torch.where(mine.unsqueeze(1), mat_a.unsqueeze(0), zero), mat_b)
    raise UnsupportedInModel(
        f"grouped_mm of {mat_a.dim()}-D by {mat_b.dim()}-D operands with offsets is not supported"
    )


_GROUPED_MM = tuple(
    f
    for f in (getattr(torch, "_grouped_mm", None), getattr(torch.nn.functional, "grouped_mm", None))
    if f
)


class BufferUpdates(torch.overrides.TorchFunctionMode):
    """While tracing, replaces `F.batch_norm` (and `torch.batch_norm`) by
    `batch_norm_functional` and records the new running statistics of the
    buffers it is given: {buffer name: new value}. `buffers` maps the buffer
    tensors the module is called with to their names. Grouped 2-D
    convolutions are replaced by `grouped_conv2d`, grouped matrix products
    (MoE experts) by `grouped_mm`."""

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
        if func in _GROUPED_MM:
            return grouped_mm(*args, **kwargs)
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


class Float64Kernels(torch.overrides.TorchFunctionMode):
    """Eager references in float64 run ops aten has no float64 CPU kernel
    for (the grouped matrix product of MoE experts) as their plain-ops
    decomposition here; other dtypes keep aten's kernel."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _GROUPED_MM and args and args[0].dtype == torch.float64:
            return grouped_mm(*args, **kwargs)
        return func(*args, **kwargs)


def eager_context():
    """The context of the frontend's eager references (float32 and float64):
    SDPA's math backend, float64 grouped matrix products in plain ops."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    stack = contextlib.ExitStack()
    stack.enter_context(sdpa_kernel(SDPBackend.MATH))
    stack.enter_context(Float64Kernels())
    return stack
