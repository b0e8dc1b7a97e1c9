"""Small builder for MLIR text in upstream ops (linalg, tensor, arith, math).

Values are tensors with static shapes; every op gets a fresh SSA name so the
emitted text never shadows a name (linalg regions are not isolated from above).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count


@dataclass(frozen=True)
class Value:
    name: str
    shape: tuple
    elem: str = "f32"

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.elem)


def tensor_type(shape, elem: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


def affine_map(ndims: int, results) -> str:
    dims = ", ".join(f"d{i}" for i in range(ndims))
    res = ", ".join(f"d{i}" for i in results)
    return f"affine_map<({dims}) -> ({res})>"


def float_literal(v: float) -> str:
    # MLIR float literals need a '.', which repr() omits for e.g. 1e-06.
    return f"{float(v):.17e}"


IDENTITY = object()  # marker: input indexed like the iteration space


class Region:
    """Body of a linalg op: scalar ops with fresh names."""

    def __init__(self, builder: FuncBuilder):
        self._b = builder
        self.lines = []

    def let(self, fmt: str, *operands) -> str:
        name = self._b.fresh("s")
        self.lines.append(f"{name} = {fmt.format(*operands)}")
        return name

    # Float helpers (f32 scalars).
    def add(self, a, b):
        return self.let("arith.addf {0}, {1} : f32", a, b)

    def sub(self, a, b):
        return self.let("arith.subf {0}, {1} : f32", a, b)

    def mul(self, a, b):
        return self.let("arith.mulf {0}, {1} : f32", a, b)

    def div(self, a, b):
        return self.let("arith.divf {0}, {1} : f32", a, b)

    def neg(self, a):
        return self.let("arith.negf {0} : f32", a)

    def math(self, fn: str, a):
        return self.let(f"math.{fn} {{0}} : f32", a)

    def const(self, v: float):
        return self._b.const(v)


class FuncBuilder:
    def __init__(self):
        self._ids = count()
        self.lines = []
        # Constants go first in the body, so regions can use them anywhere.
        self.prelude = []
        self._consts = {}

    def fresh(self, hint: str = "v") -> str:
        return f"%{hint}{next(self._ids)}"

    def emit(self, text: str) -> None:
        for line in text.split("\n"):
            self.lines.append(line)

    def comment(self, text: str) -> None:
        self.lines.append(f"// {text}")

    def const(self, v: float, elem: str = "f32") -> str:
        key = (float_literal(v), elem)
        if key not in self._consts:
            name = self.fresh("cst")
            self._consts[key] = name
            self.prelude.append(f"{name} = arith.constant {key[0]} : {elem}")
        return self._consts[key]

    def const_bits(self, bits: str, elem: str = "f32") -> str:
        key = (bits, elem)
        if key not in self._consts:
            name = self.fresh("cst")
            self._consts[key] = name
            self.prelude.append(f"{name} = arith.constant {bits} : {elem}")
        return self._consts[key]

    # ---------------------------------------------------------------- tensors

    def empty(self, shape, elem: str = "f32") -> Value:
        v = Value(self.fresh("empty"), tuple(shape), elem)
        self.emit(f"{v.name} = tensor.empty() : {v.type}")
        return v

    def fill(self, scalar: str, shape, elem: str = "f32") -> Value:
        e = self.empty(shape, elem)
        v = Value(self.fresh("fill"), tuple(shape), elem)
        self.emit(
            f"{v.name} = linalg.fill ins({scalar} : {elem}) outs({e.name} : {e.type}) -> {v.type}"
        )
        return v

    def zeros(self, shape) -> Value:
        return self.fill(self.const(0.0), shape)

    def generic(
        self,
        ins,
        out_shape,
        body,
        *,
        iterators=None,
        out_map=None,
        init: Value | None = None,
        out_elem: str = "f32",
        hint: str = "g",
    ) -> Value:
        """linalg.generic over an iteration space of rank len(iterators).

        ins: list of (Value, results-of-map) where the map is a tuple of loop
        dims, or IDENTITY. body(region, *in_scalars, out_scalar) -> scalar.
        """
        if iterators is None:
            iterators = ["parallel"] * len(out_shape)
        n = len(iterators)
        if out_map is None:
            out_map = tuple(range(n))
        maps = [affine_map(n, tuple(range(n)) if m is IDENTITY else m) for _, m in ins]
        maps.append(affine_map(n, out_map))
        if init is None:
            init = self.empty(out_shape, out_elem)
        region = Region(self)
        args = [self.fresh("a") for _ in ins]
        out_arg = self.fresh("o")
        result = body(region, *args, out_arg)
        block_args = ", ".join(f"{a}: {v.elem}" for a, (v, _) in zip(args, ins))
        block_args = (block_args + ", " if block_args else "") + f"{out_arg}: {out_elem}"
        v = Value(self.fresh(hint), tuple(out_shape), out_elem)
        iters = ", ".join(f'"{it}"' for it in iterators)
        in_names = ", ".join(x.name for x, _ in ins)
        in_types = ", ".join(x.type for x, _ in ins)
        ins_text = f" ins({in_names} : {in_types})" if ins else ""
        self.emit(
            f"{v.name} = linalg.generic {{indexing_maps = [{', '.join(maps)}],"
            f" iterator_types = [{iters}]}}{ins_text}"
            f" outs({init.name} : {init.type}) {{"
        )
        self.emit(f"^bb0({block_args}):")
        for line in region.lines:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {result} : {out_elem}")
        self.emit(f"}} -> {v.type}")
        return v

    def map(self, ins, body, hint: str = "ew", out_shape=None, out_elem="f32"):
        """Elementwise op; inputs are (Value, map) or a Value (identity map)."""
        norm = [(x, IDENTITY) if isinstance(x, Value) else x for x in ins]
        if out_shape is None:
            out_shape = next(x.shape for x, m in norm if m is IDENTITY)
        return self.generic(norm, out_shape, body, hint=hint, out_elem=out_elem)

    def cast(self, x: Value, elem: str) -> Value:
        if x.elem == elem:
            return x
        op = "arith.extf" if x.elem == "bf16" else "arith.truncf"
        return self.map(
            [x],
            lambda r, a, o: r.let(f"{op} {{0}} : {x.elem} to {elem}", a),
            hint="cast",
            out_elem=elem,
        )

    def reduce_sum(self, x: Value, keep, body=None, extra=(), hint="sum") -> Value:
        """Sum of body(x, *extra) over the dims of x not in `keep`.
        extra: list of (Value, map) indexed in x's iteration space."""
        n = len(x.shape)
        iters = ["parallel" if d in keep else "reduction" for d in range(n)]
        out_shape = tuple(x.shape[d] for d in keep)
        init = self.zeros(out_shape)
        if body is None:
            body = lambda r, a, *rest: a  # noqa: E731

        def full(r, a, *rest):
            *others, acc = rest
            return r.add(body(r, a, *others), acc)

        return self.generic(
            [(x, IDENTITY)] + list(extra),
            out_shape,
            full,
            iterators=iters,
            out_map=tuple(keep),
            init=init,
            hint=hint,
        )

    def matmul(self, a: Value, b: Value, *, ta=False, tb=False, init: Value | None = None) -> Value:
        """C (+)= op(a) @ op(b) with op = transpose when ta/tb (2-D)."""
        m = a.shape[1] if ta else a.shape[0]
        ka = a.shape[0] if ta else a.shape[1]
        kb = b.shape[1] if tb else b.shape[0]
        n = b.shape[0] if tb else b.shape[1]
        assert ka == kb, (a.shape, b.shape, ta, tb)
        if init is None:
            init = self.zeros((m, n))
        assert init.shape == (m, n), (init.shape, m, n)
        v = Value(self.fresh("mm"), (m, n))
        maps = ""
        if ta or tb:
            amap = affine_map(3, (2, 0) if ta else (0, 2))
            bmap = affine_map(3, (1, 2) if tb else (2, 1))
            maps = f" indexing_maps = [{amap}, {bmap}, {affine_map(3, (0, 1))}]"
        self.emit(
            f"{v.name} = linalg.matmul{maps} ins({a.name}, {b.name} : {a.type},"
            f" {b.type}) outs({init.name} : {init.type}) -> {v.type}"
        )
        return v

    def contract(self, a, amap, b, bmap, out_shape, out_map, iterators, hint="bmm"):
        """Sum-of-products contraction sum(a * b) as a linalg.generic."""
        init = self.zeros(out_shape)
        return self.generic(
            [(a, amap), (b, bmap)],
            out_shape,
            lambda r, x, y, o: r.add(r.mul(x, y), o),
            iterators=iterators,
            out_map=out_map,
            init=init,
            hint=hint,
        )

    def expand(self, x: Value, reassoc, shape) -> Value:
        v = Value(self.fresh("unflat"), tuple(shape), x.elem)
        self.emit(
            f"{v.name} = tensor.expand_shape {x.name} {reassoc} output_shape"
            f" [{', '.join(map(str, shape))}] : {x.type} into {v.type}"
        )
        return v

    def collapse(self, x: Value, reassoc, shape) -> Value:
        v = Value(self.fresh("flat"), tuple(shape), x.elem)
        self.emit(f"{v.name} = tensor.collapse_shape {x.name} {reassoc} : {x.type} into {v.type}")
        return v
