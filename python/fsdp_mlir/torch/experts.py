"""Sparse mixture-of-experts products as operators of their own.

A sparse MoE sorts its (token, expert) rows by expert and multiplies each
group of rows by its expert's matrix (`F.grouped_mm` with offsets). The group
sizes depend on the routing, so no static-shaped aten form computes only the
routed products. While tracing, the frontend writes such a product as
`fsdp::grouped_mm` and its weight gradient as `fsdp::grouped_mm_transpose_lhs`
(operators registered here, each differentiable in terms of the other two);
the export carries them through torch-mlir as calls and writes them as
`fsdp.grouped_matmul` / `fsdp.grouped_matmul_transpose_lhs`, which
fsdp-opt lowers to one contraction per group (`fsdp-grouped-matmul`): k / E
of the multiply-adds of every expert on every token.

Outside a trace the operators run their groups with `torch.mm` (any float
dtype), which is also what the eager references use.
"""

from __future__ import annotations

import re

import torch

# How the export finds the operators in torch-mlir's import, and the fsdp op
# each becomes: {torch.operator name: fsdp op name}.
OPS = {
    "torch.fsdp.grouped_mm": "fsdp.grouped_matmul",
    "torch.fsdp.grouped_mm_transpose_lhs": "fsdp.grouped_matmul_transpose_lhs",
    "torch.fsdp.topk_indices": "fsdp.topk_indices",
    "torch.fsdp.sort_indices": "fsdp.topk_indices",
}
# Operators whose trailing operands are boolean constants, which the fsdp op
# takes as unit attributes (set when true): {torch.operator name: names}.
FLAGS = {
    "torch.fsdp.topk_indices": ("largest", "sorted"),
    "torch.fsdp.sort_indices": ("largest",),
}
# Unit attributes the fsdp op always gets: {torch.operator name: names}.
ATTRS = {"torch.fsdp.sort_indices": ("sort",)}


def _bounds(offs: torch.Tensor, rows: int) -> list:
    """(start, end) of each group: group g ends at offs[g], clamped to
    [start, rows] (what fsdp-grouped-matmul reads at run time)."""
    out, start = [], 0
    for end in offs.tolist():
        end = min(max(int(end), start), rows)
        out.append((start, end))
        start = end
    return out


def _grouped_mm(lhs: torch.Tensor, rhs: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """(S, K) rows in groups (group g ends at offs[g]) times (E, K, N): row r
    of group g is lhs[r] @ rhs[g]; rows past offs[-1] are zero."""
    out = lhs.new_zeros(lhs.shape[0], rhs.shape[2])
    for g, (start, end) in enumerate(_bounds(offs, lhs.shape[0])):
        if end > start:
            out[start:end] = lhs[start:end] @ rhs[g]
    return out


def _grouped_mm_transpose_lhs(
    lhs: torch.Tensor, rhs: torch.Tensor, offs: torch.Tensor
) -> torch.Tensor:
    """Per group g of rows: lhs[group]^T @ rhs[group], (E, K, N); an empty
    group gives zeros."""
    out = lhs.new_zeros(offs.shape[0], lhs.shape[1], rhs.shape[1])
    for g, (start, end) in enumerate(_bounds(offs, lhs.shape[0])):
        if end > start:
            out[g] = lhs[start:end].t() @ rhs[start:end]
    return out


# Operators of a plain library (not torch.library.custom_op, whose autograd
# torch.func refuses): functional kernels, shapes for fake tensors; their
# derivatives are the autograd.Functions below.
_LIB = torch.library.Library("fsdp", "DEF")
_LIB.define("grouped_mm(Tensor lhs, Tensor rhs, Tensor offs) -> Tensor")
_LIB.define("grouped_mm_transpose_lhs(Tensor lhs, Tensor rhs, Tensor offs) -> Tensor")
_LIB.impl("grouped_mm", _grouped_mm, "CompositeExplicitAutograd")
_LIB.impl("grouped_mm_transpose_lhs", _grouped_mm_transpose_lhs, "CompositeExplicitAutograd")
torch.library.register_fake(
    "fsdp::grouped_mm", lambda lhs, rhs, offs: lhs.new_empty(lhs.shape[0], rhs.shape[2]), lib=_LIB
)
torch.library.register_fake(
    "fsdp::grouped_mm_transpose_lhs",
    lambda lhs, rhs, offs: lhs.new_empty(offs.shape[0], lhs.shape[1], rhs.shape[1]),
    lib=_LIB,
)


# The router's topk: the indices torch's CPU kernel picks (its tie order is
# that of std::partial_sort / std::nth_element, not position order), with
# the same selection in position order (`stable`) for where that kernel
# cannot run (compute=gpu). The export writes it as `fsdp.topk_indices`,
# which the runtime's copy of aten's algorithm computes; the decomposition
# of aten.topk gathers the values at these indices. Integer results: no
# derivative.
_LIB.define("topk_indices(Tensor input, Tensor stable, bool largest, bool sorted) -> Tensor")
_LIB.impl(
    "topk_indices",
    lambda input, stable, largest, sorted: (
        torch.topk(input, stable.shape[-1], -1, largest, sorted).indices
    ),
    "CompositeExplicitAutograd",
)
torch.library.register_fake(
    "fsdp::topk_indices",
    lambda input, stable, largest, sorted: stable.new_empty(stable.shape),
    lib=_LIB,
)


# torch.sort / argsort with stable=False: the indices torch's CPU kernel
# gives (std::sort, whose order of equal values above 16 elements is not
# position order), with the stable sort's (`stable`) for compute=gpu. The
# export writes it as `fsdp.topk_indices {sort}` (`largest`: descending),
# which the runtime's copy of aten's sort computes.
_LIB.define("sort_indices(Tensor input, Tensor stable, bool descending) -> Tensor")
_LIB.impl(
    "sort_indices",
    lambda input, stable, descending: (
        torch.sort(input, dim=-1, descending=descending, stable=False).indices
    ),
    "CompositeExplicitAutograd",
)
torch.library.register_fake(
    "fsdp::sort_indices",
    lambda input, stable, descending: stable.new_empty(stable.shape),
    lib=_LIB,
)


class GroupedMatmul(torch.autograd.Function):
    """fsdp::grouped_mm with its derivative: d lhs = grouped_mm(grad,
    rhs^T), d rhs = grouped_mm_transpose_lhs(lhs, grad), each on the same
    groups. The export keeps it (export.CustomFunctions traces other
    Functions through)."""

    fsdp_keep = True

    @staticmethod
    def forward(lhs, rhs, offs):
        return torch.ops.fsdp.grouped_mm(lhs, rhs, offs)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        lhs, rhs, offs = ctx.saved_tensors
        d_lhs = d_rhs = None
        if ctx.needs_input_grad[0]:
            d_lhs = GroupedMatmul.apply(grad, rhs.transpose(1, 2), offs)
        if ctx.needs_input_grad[1]:
            d_rhs = GroupedMatmulTransposeLhs.apply(lhs, grad, offs)
        return d_lhs, d_rhs, None


class GroupedMatmulTransposeLhs(torch.autograd.Function):
    """fsdp::grouped_mm_transpose_lhs with its derivative: out[g] = sum over
    the group's rows of lhs[r]^T rhs[r], so d lhs[r] = rhs[r] grad[g]^T and
    d rhs[r] = lhs[r] grad[g], grouped products again."""

    fsdp_keep = True

    @staticmethod
    def forward(lhs, rhs, offs):
        return torch.ops.fsdp.grouped_mm_transpose_lhs(lhs, rhs, offs)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad):
        lhs, rhs, offs = ctx.saved_tensors
        d_lhs = d_rhs = None
        if ctx.needs_input_grad[0]:
            d_lhs = GroupedMatmul.apply(rhs, grad.transpose(1, 2), offs)
        if ctx.needs_input_grad[1]:
            d_rhs = GroupedMatmul.apply(lhs, grad, offs)
        return d_lhs, d_rhs, None


class FunctionalizedFunctions:
    """While tracing: torch.func.functionalize has no rule for autograd
    Functions ("NYI"). The Functions here are functional (no mutation, no
    views), so the rule runs them one level down on the unwrapped tensors
    and wraps their results."""

    def __enter__(self):
        from torch._C._functorch import TransformType
        from torch._functorch.autograd_function import custom_function_call
        from torch._functorch.eager_transforms import (
            _unwrap_all_tensors_from_functional,
            _wrap_all_tensors_to_functional,
        )

        def rule(interpreter, function, *operands):
            if not getattr(function, "fsdp_keep", False):
                return self.saved(interpreter, function, *operands)
            args = _unwrap_all_tensors_from_functional(
                operands, reapply_views=interpreter.functionalize_add_back_views()
            )
            with interpreter.lower():
                out = custom_function_call(function, *args)
            return _wrap_all_tensors_to_functional(out, interpreter.level())

        self.table = custom_function_call.functorch_table
        self.key = TransformType.Functionalize
        self.saved = self.table[self.key]
        self.table[self.key] = rule
        return self

    def __exit__(self, *exc):
        self.table[self.key] = self.saved


def sparse_grouped_mm(mat_a, mat_b, offs):
    """`F.grouped_mm(mat_a, mat_b, offs=offs)` for the two offset forms as
    the operators above: (S, K) rows by (E, K, N), and (M, S) by (S, N) with
    the groups along S (a weight gradient written by hand)."""
    if mat_a.dim() == 2 and mat_b.dim() == 3:
        return GroupedMatmul.apply(mat_a, mat_b, offs)
    return GroupedMatmulTransposeLhs.apply(mat_a.t(), mat_b, offs)


_CONTRACTION_RE = re.compile(
    r"(?:linalg\.(?:batch_)?matmul\b.*ins\([^:]*:\s*(?P<a>tensor<[^>]*>),\s*(?P<b>tensor<[^>]*>)\)"
    r".*outs\([^:]*:\s*(?P<c>tensor<[^>]*>)\))"
    r'|(?:"(?P<op>fsdp\.grouped_matmul(?:_transpose_lhs)?)"\([^)]*\)\s*:\s*\((?P<ga>tensor<[^>]*>),'
    r"\s*(?P<gb>tensor<[^>]*>),\s*tensor<[^>]*>\)\s*->\s*(?P<gc>tensor<[^>]*>))"
)


def _shape(tensor_type: str) -> list:
    dims = tensor_type[len("tensor<") : -1].split("x")[:-1]
    return [int(d) for d in dims]


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def contraction_flops(mlir: str) -> dict:
    """Multiply-add FLOPs (2 per product) of the contractions in an exported
    step's text: `linalg.matmul` / `linalg.batch_matmul` (dense products,
    from their operand and result types) and the grouped products (2 S K N
    each: every row belongs to one group, so the groups together do the
    rows' products once). {"dense": ..., "grouped": ..., "total": ...}."""
    dense = grouped = 0
    for line in mlir.splitlines():
        m = _CONTRACTION_RE.search(line)
        if not m:
            continue
        if m.group("op"):
            a, b, c = (_shape(m.group(k)) for k in ("ga", "gb", "gc"))
            if m.group("op") == "fsdp.grouped_matmul":
                grouped += 2 * a[0] * a[1] * c[1]  # (S, K) x (E, K, N)
            else:
                grouped += 2 * a[0] * a[1] * b[1]  # (S, K)^T x (S, N)
            continue
        a, c = _shape(m.group("a")), _shape(m.group("c"))
        k = _numel(a) * c[-1] // _numel(c)  # a is (..., M, K) or (..., K, M)
        dense += 2 * _numel(c) * k
    return {"dense": dense, "grouped": grouped, "total": dense + grouped}
