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


def _scatter_rows(x, slot, values, accumulate):
    """The scatter every index_put / scatter / index_add form reduces to:
    x (N, W), slot (M,) in [0, N), values (M, W); row slot[j] of x gets row j
    of values added (accumulate) or written, the last write winning for a
    repeated slot as in aten's sequential CPU loops.

    Floating point: one_hot(slot)^T @ values, which fsdp-opt's
    fsdp-one-hot-scatter turns into an O(M x W) loop adding each row to its
    slot in index order (aten's order). Writes add the value of each slot's
    last writer into zeros (exact: 0 + v) and keep x where no index names
    the slot. Integers: the one-hot sum (O(M x N x W)), exact."""
    n, m = x.shape[0], slot.shape[0]
    if m == 0:
        return x.clone()
    floating = x.is_floating_point()
    one_hot = _one_hot(slot, n, x.dtype if floating else torch.int64)  # (M, N)

    def add_up(rows):  # (N, W): sum over j of rows[j] into slot[j]
        if floating:
            return one_hot.t() @ rows
        return (one_hot.unsqueeze(-1) * rows.unsqueeze(1)).sum(0).to(x.dtype)

    values = values.to(x.dtype)
    if accumulate:
        return x + add_up(values)
    last = _last_of_slot(slot)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    picked = add_up(torch.where(last.unsqueeze(-1), values, zero))
    ones = torch.ones((m, 1), dtype=x.dtype if floating else torch.int64, device=x.device)
    hit = add_up(ones) > 0  # (N, 1)
    return torch.where(hit, picked, x)


# Up to this many positions, the last writer of each slot is found by
# comparing every position with every other (M^2 small comparisons, a short
# import); above it, by a stable sort of the slots (O(M log^2 M)).
PAIRWISE_LAST_WRITER = 64


def _last_of_slot(slot):
    """(M,) bool: whether position j is the last one naming its slot
    (no k > j with slot[k] == slot[j])."""
    m = slot.shape[0]
    pos = torch.arange(m, device=slot.device)
    if m <= PAIRWISE_LAST_WRITER:
        later = (slot.unsqueeze(0) == slot.unsqueeze(1)) & (pos.unsqueeze(0) > pos.unsqueeze(1))
        return ~later.any(-1)
    ordered, order = sort(slot, 0, False, stable=True)  # equal slots in position order
    ends = torch.cat([ordered[1:] != ordered[:-1], torch.ones(1, dtype=torch.bool)])
    # Back to positions: the inverse permutation of order, whose slots are
    # all distinct (an accumulation into zeros is exact).
    inverse = _scatter_rows(
        torch.zeros((m, 1), dtype=torch.int64, device=slot.device),
        order,
        pos.unsqueeze(-1),
        True,
    ).reshape(m)
    return ends[inverse]


def _normalized(index, n):
    """An index into n slots with negative values counted from the end."""
    return torch.where(index < 0, index + n, index)


def index_put(x, indices, values, accumulate=False):
    """aten.index_put (and _unsafe_index_put) in every form of advanced
    indexing: any number of integer index tensors (broadcast together) on
    any dims, None for the dims taken whole, with or without accumulation,
    and a boolean mask over leading dims with a single value (`x[mask] =
    v`). The indexed dims are moved first and flattened to one slot per
    index combination, the other dims to a row: a scatter of rows
    (_scatter_rows; torch-mlir emits tm_tensor.scatter)."""
    indices = list(indices)
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        return _masked_put(x, indices, values, accumulate)
    if len(indices) > x.dim():
        raise UnsupportedInModel(
            f"aten.index_put with {len(indices)} indices into a {x.dim()}-D tensor"
        )
    indices += [None] * (x.dim() - len(indices))
    dims = [d for d, i in enumerate(indices) if i is not None]
    if not dims:
        return (x + values if accumulate else values.to(x.dtype).expand(x.shape)).clone()
    idx = torch.broadcast_tensors(*[indices[d] for d in dims])
    lead = tuple(idx[0].shape)
    rest = [d for d in range(x.dim()) if d not in dims]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    if adjacent:  # x[:, i, j] is (x.shape[0], *lead, ...)
        where = dims[0]
        shape = tuple(x.shape[:where]) + lead + tuple(x.shape[dims[-1] + 1 :])
    else:  # separated index tensors: the indexed dims come first
        where = 0
        shape = lead + tuple(x.shape[d] for d in rest)
    vals = values.to(x.dtype).expand(shape)
    if where:
        vals = vals.movedim(tuple(range(where, where + len(lead))), tuple(range(len(lead))))
    slot = torch.zeros(lead, dtype=torch.int64, device=x.device)
    for d, i in zip(dims, idx):
        slot = slot * x.shape[d] + _normalized(i.to(torch.int64), x.shape[d])
    moved = x.permute(dims + rest)
    n = 1
    for d in dims:
        n *= x.shape[d]
    out = _scatter_rows(
        moved.reshape(n, -1), slot.reshape(-1), vals.reshape(slot.numel(), -1), accumulate
    )
    inverse = [0] * x.dim()
    for k, d in enumerate(dims + rest):
        inverse[d] = k
    return out.reshape(moved.shape).permute(inverse).contiguous()


def _masked_put(x, indices, values, accumulate):
    """index_put with one boolean mask over x's leading dims and a single
    value: a select (the general mask form sizes its result by the mask's
    count, a value-dependent shape)."""
    if len(indices) != 1 or values.numel() != 1:
        raise UnsupportedInModel(
            "aten.index_put with a boolean mask is supported for one mask and a single "
            "value (x[mask] = v); other forms depend on the number of True entries"
        )
    mask = indices[0].to(torch.bool)
    if tuple(mask.shape) != tuple(x.shape[: mask.dim()]):
        raise UnsupportedInModel(
            f"aten.index_put with a boolean mask of shape {tuple(mask.shape)} for a "
            f"tensor of shape {tuple(x.shape)}"
        )
    mask = mask.reshape(tuple(mask.shape) + (1,) * (x.dim() - mask.dim()))
    value = values.reshape(()).to(x.dtype)
    if accumulate:
        return torch.where(mask, x + value, x)
    return torch.where(mask, value, x)


def _elementwise_slots(self, dim, index):
    """The flat slot in `self` of every element of a scatter's `index` (its
    own position with the coordinate along `dim` replaced by its value)."""
    dim = dim % max(self.dim(), 1)
    if self.dim() == 0:
        return _normalized(index.reshape(()), 1).reshape(-1)
    slot = torch.zeros(index.shape, dtype=torch.int64, device=index.device)
    for d in range(self.dim()):
        if d == dim:
            coord = _normalized(index.to(torch.int64), self.shape[d])
        else:
            shape = [1] * index.dim()
            shape[d] = index.shape[d]
            coord = torch.arange(index.shape[d], device=index.device).reshape(shape)
        slot = slot * self.shape[d] + coord
    return slot.reshape(-1)


def _scatter_src(index, src, dtype):
    """src cut to index's shape (scatter reads only that corner), or a
    scalar value filled to it."""
    if isinstance(src, torch.Tensor) and src.dim() > 0:
        return src[tuple(slice(0, k) for k in index.shape)].to(dtype)
    value = src.item() if isinstance(src, torch.Tensor) else src
    return torch.full(index.shape, value, dtype=dtype, device=index.device)


def _scatter_elements(self, dim, index, src, accumulate):
    if index.numel() == 0:
        return self.clone()
    slot = _elementwise_slots(self, dim, index)
    vals = _scatter_src(index, src, self.dtype).reshape(-1, 1)
    out = _scatter_rows(self.reshape(-1, 1), slot, vals, accumulate)
    return out.reshape(self.shape)


def scatter(self, dim, index, src, reduce=None):
    """aten.scatter (src and value forms, `reduce="add"`): out[..., index[...,
    j, ...], ...] = src[..., j, ...] along `dim`, the last write winning for
    a repeated slot as in aten's sequential CPU loop; self elsewhere. Every
    element of index names one flat slot of self: a scatter of 1-wide rows
    (_scatter_rows). The backward of topk / max / sort is one."""
    if reduce not in (None, "add"):
        raise UnsupportedInModel(f"aten.scatter with reduce={reduce!r} is not supported")
    return _scatter_elements(self, dim, index, src, reduce == "add")


def scatter_value(self, dim, index, value, reduce=None):
    return scatter(self, dim, index, value, reduce)


def scatter_add(self, dim, index, src):
    """aten.scatter_add: a scatter-add of every element of src into the slot
    its index names, in index order (aten's)."""
    return _scatter_elements(self, dim, index, src, True)


def scatter_reduce(self, dim, index, src, reduce, include_self=True):
    """aten.scatter_reduce with reduce "sum" or "mean" (aten's mean divides
    by the count of values including self's own when include_self; slots no
    index names keep self)."""
    if reduce not in ("sum", "mean"):
        raise UnsupportedInModel(f"aten.scatter_reduce with reduce={reduce!r} is not supported")
    if index.numel() == 0:
        return self.clone()
    slot = _elementwise_slots(self, dim, index)
    flat = self.reshape(-1, 1)
    vals = _scatter_src(index, src, self.dtype).reshape(-1, 1)
    count = _scatter_rows(torch.zeros_like(flat), slot, torch.ones_like(vals), True)
    base = flat if include_self else torch.where(count > 0, torch.zeros_like(flat), flat)
    total = _scatter_rows(base, slot, vals, True)
    if reduce == "mean":
        divisor = count + (1 if include_self else 0)
        divisor = torch.where(divisor > 0, divisor, torch.ones_like(divisor))
        mean = total / divisor if self.is_floating_point() else total // divisor
        total = torch.where(count > 0, mean, flat)
    return total.reshape(self.shape)


def index_add(self, dim, index, source, alpha=1):
    """aten.index_add: self + alpha * source's slices added into the slices
    `index` names along `dim`: index_put(accumulate=True) with the index on
    `dim`."""
    if self.dim() == 0:
        return index_put(self.reshape(1), [index.reshape(-1)], source.reshape(-1) * alpha, True)[0]
    if alpha != 1:
        source = source * alpha
    return index_put(self, [None] * (dim % self.dim()) + [index], source, True)


def index_copy(self, dim, index, source):
    """aten.index_copy: index_put without accumulation on `dim`."""
    if self.dim() == 0:
        return source.clone().to(self.dtype).reshape(())
    return index_put(self, [None] * (dim % self.dim()) + [index], source, False)


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


def _key_order(a, b, descending):
    """(a strictly before b, a equal to b) elementwise for sort keys: NaN
    above every number, as aten's sort and topk order them."""
    if a.is_floating_point():
        nan_a, nan_b = torch.isnan(a), torch.isnan(b)
        if descending:
            before = (a > b) | (nan_a & ~nan_b)
        else:
            before = (a < b) | (nan_b & ~nan_a)
        return before, (a == b) | (nan_a & nan_b)
    return (a > b) if descending else (a < b), a == b


def _bitonic_sort(x, descending):
    """Stable sort of x along its last dim: (values, int64 indices). A
    bitonic network over (key, original position), padded to a power of two
    with entries that sort after every real one: log2(P) (log2(P) + 1) / 2
    compare-exchange stages of elementwise ops, O(n log^2 n) and no
    value-dependent control flow. Ties keep their positions' order."""
    n = x.shape[-1]
    lead = tuple(x.shape[:-1])
    size = 1
    while size < n:
        size *= 2
    pos = torch.arange(size, device=x.device).expand(lead + (size,))
    if size > n:
        x = torch.nn.functional.pad(x, (0, size - n))

    def before(ka, ia, kb, ib):  # entry a strictly before entry b
        strict, equal = _key_order(ka, kb, descending)
        pad_a, pad_b = ia >= n, ib >= n
        real = strict | (equal & (ia < ib))
        return (~pad_a & pad_b) | ((pad_a == pad_b) & torch.where(pad_a, ia < ib, real))

    keys, idx = x, pos
    k = 2
    while k <= size:
        j = k // 2
        while j >= 1:
            shape = lead + (size // (2 * j), 2, j)
            ks, ids = keys.reshape(shape), idx.reshape(shape)
            k_lo, k_hi = ks.select(-2, 0), ks.select(-2, 1)
            i_lo, i_hi = ids.select(-2, 0), ids.select(-2, 1)
            # Block b (entries b*2j ...) sorts upward when bit k of b*2j is 0.
            block = torch.arange(size // (2 * j), device=x.device) * (2 * j)
            up = ((block // k) % 2 == 0).unsqueeze(-1)
            swap = torch.where(up, before(k_hi, i_hi, k_lo, i_lo), before(k_lo, i_lo, k_hi, i_hi))
            keys = torch.stack(
                [torch.where(swap, k_hi, k_lo), torch.where(swap, k_lo, k_hi)], -2
            ).reshape(lead + (size,))
            idx = torch.stack(
                [torch.where(swap, i_hi, i_lo), torch.where(swap, i_lo, i_hi)], -2
            ).reshape(lead + (size,))
            j //= 2
        k *= 2
    return keys[..., :n], idx[..., :n]


_SORT_FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
RADIX_SORT_MIN = 32768  # aten's internal::GRAIN_SIZE


def _radix_sorted(x, descending):
    """Whether aten's CPU sort takes fbgemm's radix sort (stable) instead of
    std::sort: a 1-D integer tensor of at least GRAIN_SIZE elements, sorted
    ascending (SortingKernel.cpp, can_use_radix_sort)."""
    integer = not x.is_floating_point() and x.dtype != torch.bool
    return x.dim() == 1 and integer and not descending and x.numel() >= RADIX_SORT_MIN


def sort(x, dim=-1, descending=False, stable=False):
    """aten.sort along `dim`, NaN last (first when descending) as in aten.
    With `stable`, a stable sort (_bitonic_sort, O(n log^2 n); torch-mlir
    lowers sort to tm_tensor.sort): equal keys keep their order, as aten's.
    Otherwise (torch's default) the indices aten's unstable CPU sort gives,
    ties included (`fsdp::sort_indices`, experts.py: the runtime runs
    aten's std::sort, whose order of equal values above 16 elements is not
    position order), and the values gathered there; the operator also gets
    the stable sort's indices, which compute=gpu uses."""
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    if x.shape[dim] <= 1:
        return x.clone(), torch.zeros(x.shape, dtype=torch.int64, device=x.device)
    moved = x.movedim(dim, -1)
    values, indices = _bitonic_sort(moved, descending)
    if _radix_sorted(x, descending):
        stable = True  # aten's fbgemm radix sort, which is stable
    if not stable:
        from . import experts  # noqa: F401  (registers fsdp::sort_indices)

        moved = moved.contiguous()
        # The runtime's kernel reads f32, f64, bf16, f16, i32 and i64: other
        # dtypes widen exactly, which keeps every comparison (and the order).
        key = moved
        if not x.is_floating_point() and x.dtype not in (torch.int32, torch.int64):
            key = moved.to(torch.int64)
        elif x.is_floating_point() and x.dtype not in _SORT_FLOATS:
            key = moved.to(torch.float32)
        indices = torch.ops.fsdp.sort_indices(key, indices.contiguous(), bool(descending))
        values = moved.gather(-1, indices)
    return values.movedim(-1, dim).contiguous(), indices.movedim(-1, dim).contiguous()


def sort_stable(x, *, stable=None, dim=-1, descending=False):
    return sort(x, dim, descending, bool(stable))


def topk(x, k, dim=-1, largest=True, sorted=True):
    """aten.topk with the indices aten's CPU kernel picks, ties and NaN
    included (`fsdp::topk_indices`, experts.py: the runtime runs aten's
    algorithm, std::partial_sort / std::nth_element, whose order of equal
    values is not position order), and the values gathered there. The
    operator also gets the first k entries of a stable sort (descending for
    largest, O(n log^2 n) along `dim`), the same values with ties in
    position order, which compute=gpu uses."""
    from . import experts  # noqa: F401  (registers fsdp::topk_indices)

    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    if k == 0 or x.shape[dim] <= 1:
        values, indices = sort(x, dim, largest, stable=True)
        return values.narrow(dim, 0, k).contiguous(), indices.narrow(dim, 0, k).contiguous()
    moved = x.movedim(dim, -1).contiguous()
    _, order = _bitonic_sort(moved, largest)
    stable = order[..., :k].contiguous()
    indices = torch.ops.fsdp.topk_indices(moved, stable, bool(largest), bool(sorted))
    values = moved.gather(-1, indices)
    return values.movedim(-1, dim).contiguous(), indices.movedim(-1, dim).contiguous()


def cumsum(x, dim, dtype=None):
    """aten.cumsum as a scan of log2(n) shifted additions (Hillis-Steele):
    O(n log n) along `dim` (torch-mlir lowers cumsum to its own
    tm_tensor.scan, which upstream MLIR cannot parse). Floats are summed in
    float64 and rounded once, as aten's CPU kernel accumulates them (its
    accumulator type for float is double): each output is the float64 sum
    rounded, so the order of additions does not show. Integers are exact."""
    if dtype is not None:
        x = x.to(dtype)
    elif not x.is_floating_point():
        x = x.to(torch.int64)  # torch promotes integer and bool cumsums to int64
    if x.dim() == 0:
        return x.clone()
    dim = dim % x.dim()
    out_dtype = x.dtype
    acc = x.to(torch.float64) if x.is_floating_point() else x
    moved = acc.movedim(dim, -1)
    n = moved.shape[-1]
    shift = 1
    while shift < n:
        # Padding, not a concatenation with zeros: no constant tensor (which
        # compute=gpu cannot read).
        moved = moved + torch.nn.functional.pad(moved[..., : n - shift], (shift, 0))
        shift *= 2
    return moved.to(out_dtype).movedim(-1, dim).contiguous()


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
    aten.scatter.src: scatter,
    aten.scatter.value: scatter_value,
    aten.scatter.reduce: scatter,
    aten.scatter.value_reduce: scatter_value,
    aten.scatter_add.default: scatter_add,
    aten.scatter_reduce.two: scatter_reduce,
    aten.index_add.default: index_add,
    aten.index_copy.default: index_copy,
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
        # Shifted by one value of each channel (detached: the gradient is
        # the same): the sum is then of values near zero, so its rounding
        # scales with their spread and not with the data's offset, as
        # torch's CPU kernel gets by summing in float64.
        first = (slice(0, 1), slice(None)) + (slice(0, 1),) * (x.dim() - 2)
        shift = x[first].detach()
        mean = shift + (x - shift).mean(dims, keepdim=True)
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


def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None, sparse=False):
    """`torch._grouped_mm` / `F.grouped_mm` (the MoE experts of transformers'
    default "grouped_mm" implementation). aten's kernel has no trace through
    torch-mlir, and its offsets are data-dependent.

    sparse: the offset forms as `fsdp::grouped_mm` (experts.py), which the
    export writes as `fsdp.grouped_matmul`: one product per group, the
    routed multiply-adds only. Otherwise in plain ops that autograd
    differentiates, DENSE: every group's matrix on every row, masked by the
    row's group. For (S, K) rows and (E, K, N) weights that is E times the
    multiply-adds of the grouped product (every expert on every token, E /
    top-k times a sparse MoE's) and an (E, S, N) intermediate. Rows past
    offs[-1] are zero (aten leaves them undefined) in both forms."""
    if bias is not None:
        raise UnsupportedInModel("grouped_mm with a bias is not supported")
    if out_dtype is not None and out_dtype != mat_a.dtype:
        raise UnsupportedInModel(f"grouped_mm with out_dtype={out_dtype} is not supported")
    if mat_a.dim() == 3 and mat_b.dim() == 3 and offs is None:
        return torch.bmm(mat_a, mat_b)
    if offs is None:
        raise UnsupportedInModel("grouped_mm of 2-D operands without offsets is not supported")
    if sparse and mat_a.dim() == 2 and mat_b.dim() in (2, 3):
        from .experts import sparse_grouped_mm

        return sparse_grouped_mm(mat_a, mat_b, offs)
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
    (MoE experts) by `grouped_mm` (sparse unless `experts` is "dense").
    `Tensor.requires_grad_` is a no-op: the step differentiates the loss
    with respect to the parameters whatever an intermediate's flag says
    (transformers and peft set it on the input embeddings' output for
    activation checkpointing, which a functorch transform refuses)."""

    def __init__(self, buffers: dict, experts: str = "sparse"):
        super().__init__()
        self.names = {id(t): n for n, t in buffers.items()}
        self.updates = {}
        self.sparse = experts == "sparse"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.requires_grad_:
            return args[0]
        if func is torch.nn.functional.batch_norm:
            return self._batch_norm(*args, **kwargs)
        if func is torch.batch_norm:
            x, w, b, rm, rv, training, momentum, eps = args[:8]
            return self._batch_norm(x, rm, rv, w, b, training, momentum, eps)
        if func in _GROUPED_MM:
            return grouped_mm(*args, **kwargs, sparse=self.sparse)
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


# ---------------------------------------------------------------- data-dependent scalars


class ScalarReads:
    """While tracing, `aten._local_scalar_dense` (`.item()`, `bool(t)`,
    `int(t)`, a Python `if` on a tensor) returns the value the example batch
    gives, so the step is specialized on it, and records a guard: a boolean
    tensor `t == value` (NaN: `isnan(t)`) that the step checks at run time
    (export.py makes it a `cf.assert` with the message). `where()` names
    the module the forward is in when the read happens."""

    active = None  # the recorder of the trace in progress

    def __init__(self, where):
        self.where = where
        self.guards = []  # [(graph node, record)]

    def __enter__(self):
        ScalarReads.active = self
        return self

    def __exit__(self, *exc):
        ScalarReads.active = None

    def read(self, t):
        from torch.fx.experimental.proxy_tensor import (
            disable_proxy_modes_tracing,
            get_proxy_mode,
            get_proxy_slot,
        )

        with disable_proxy_modes_tracing():
            value = t.item()
        mode = get_proxy_mode()
        if mode is None:
            return value
        if isinstance(value, float) and value != value:
            ok = torch.isnan(t)
        else:
            ok = t == value
        node = get_proxy_slot(ok, mode.tracer).proxy.node
        self.guards.append(
            (
                node,
                {
                    "op": "aten._local_scalar_dense",
                    "module": self.where(),
                    "value": value,
                    "dtype": str(t.dtype).replace("torch.", ""),
                    "source": _user_frame(),
                },
            )
        )
        return value


def _user_frame() -> str | None:
    """file:line and code of the innermost frame outside torch and this
    package (the model's own code that read the value)."""
    import os
    import traceback

    skip = (
        os.sep + os.path.join("torch", ""),
        os.sep + os.path.join("fsdp_mlir", "torch", ""),
        os.sep + os.path.join("torch_mlir", ""),
    )
    for frame in reversed(traceback.extract_stack()):
        if not any(s in frame.filename for s in skip):
            return (
                f"{os.path.basename(frame.filename)}:{frame.lineno}: {(frame.line or '').strip()}"
            )
    return None


def local_scalar_dense(t):
    """aten._local_scalar_dense: the example batch's value, guarded (see
    ScalarReads); without a recorder, left to torch (a tracing error)."""
    if ScalarReads.active is None:
        return NotImplemented
    return ScalarReads.active.read(t)


OVERRIDES[aten._local_scalar_dense.default] = local_scalar_dense


VALUE_DEPENDENT_SHAPE = "the shape of its result depends on the values of its input"


def _value_dependent_shape(name):
    def refuse(*args, **kwargs):
        # A RuntimeError naming the op: the trace's error handler words it
        # with the module the forward was in (export._trace_failure).
        raise RuntimeError(f"{name}: {VALUE_DEPENDENT_SHAPE}")

    return refuse


def index_tensor(x, indices):
    """aten.index with a boolean mask (`x[mask]`): its shape is the mask's
    count, refused as below; integer indices are left to torch-mlir."""
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        raise RuntimeError(f"aten.index with a boolean mask: {VALUE_DEPENDENT_SHAPE}")
    return NotImplemented


# Ops whose result's shape depends on tensor values: a trace on real values
# would bake the example batch's shape into the step, and no guard covers
# the values that follow from it (transformers' "eager" MoE experts loop over
# the experts nonzero() finds). Refused while tracing.
for _op in (
    aten.nonzero.default,
    aten.masked_select.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
):
    OVERRIDES[_op] = _value_dependent_shape(str(_op).rsplit(".", 1)[0])
OVERRIDES[aten.index.Tensor] = index_tensor


def _no_mask_skip(*args, **kwargs):
    return False


def _no_warning(*args, **kwargs):
    return None


def _no_checkpoint(function, args, kwargs, **options):
    """torch.utils.checkpoint's `_checkpoint_impl` while tracing: the
    checkpointed function, called."""
    return function(*args, **kwargs)


def library_patterns(experts: str = "sparse"):
    """Context for the trace: patterns of model libraries that read a
    tensor's value only to pick between two equivalent computations, written
    without the read. transformers' `_ignore_causal_mask_sdpa` reads whether
    the padding mask is all ones to drop the causal mask for SDPA's
    `is_causal` (the same result; transformers itself answers False when it
    traces), and `warn_if_padding_and_no_attention_mask` reads the first and
    last tokens for a warning. transformers' MoE experts (`experts`, see
    `_experts_forward`) run their "grouped_mm" implementation whichever is
    configured. Activation checkpointing (`torch.utils.checkpoint`, both
    variants; transformers' `gradient_checkpointing_enable`) calls its
    function directly: it computes the same values and gradients, only
    where they are stored differs, which fsdp-opt decides (its `recompute`
    option)."""
    import contextlib
    import sys

    import torch.utils.checkpoint as checkpoint

    stack = contextlib.ExitStack()
    if hasattr(checkpoint, "_checkpoint_impl"):
        stack.enter_context(_patched(checkpoint, "_checkpoint_impl", _no_checkpoint))
    moe = sys.modules.get("transformers.integrations.moe")
    interface = getattr(moe, "ExpertsInterface", None) if moe is not None else None
    if interface is not None and hasattr(interface, "get_interface"):
        stack.enter_context(
            _patched(interface, "get_interface", _experts_forward(interface.get_interface, experts))
        )
    masking = sys.modules.get("transformers.masking_utils")
    if masking is not None and hasattr(masking, "_ignore_causal_mask_sdpa"):
        stack.enter_context(_patched(masking, "_ignore_causal_mask_sdpa", _no_mask_skip))
    modeling = sys.modules.get("transformers.modeling_utils")
    base = getattr(modeling, "PreTrainedModel", None) if modeling is not None else None
    if base is not None and hasattr(base, "warn_if_padding_and_no_attention_mask"):
        stack.enter_context(_patched(base, "warn_if_padding_and_no_attention_mask", _no_warning))
    return stack


# transformers' experts implementations that compute the same function as
# "grouped_mm": "eager" loops over the experts nonzero() finds (a
# value-dependent shape), "batched_mm" gathers each row's expert matrices
# (an (S, K, N) copy, and a scatter of it in the backward).
_SAME_AS_GROUPED_MM = ("eager", "batched_mm")


def _experts_forward(get_interface, experts):
    """transformers' `ExpertsInterface.get_interface` for the trace: "eager"
    always, and "batched_mm" when exporting sparse experts, resolve to
    "grouped_mm" (sorted rows and F.grouped_mm, which the trace writes as
    fsdp.grouped_matmul or as the dense form)."""
    rewrite = _SAME_AS_GROUPED_MM if experts == "sparse" else ("eager",)

    def get(self, implementation, default):
        if implementation in rewrite:
            implementation = "grouped_mm"
        return get_interface(self, implementation, default)

    return get


class _patched:
    def __init__(self, owner, name, value):
        self.owner, self.name, self.value = owner, name, value

    def __enter__(self):
        self.saved = vars(self.owner).get(self.name)
        setattr(self.owner, self.name, self.value)

    def __exit__(self, *exc):
        if self.saved is None:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.saved)
