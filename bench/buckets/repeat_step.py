#!/usr/bin/env python3
"""Adds an entry that runs a step several times, for timing with fsdp-run.

fsdp-run times nothing itself and its wall time includes JIT compilation,
so the benchmark runs, from one module (the same JIT work), the step itself
and an entry `@<step>_x<R>` that calls it R times; the difference is R - 1
steps. The input is the generic form (-mlir-print-op-generic) of a
scheduled, not yet lowered module. The new entry has the step's signature
and attributes (so the runner shards inputs the same way) and returns
zeros: its outputs are meaningless, only its time counts.
The step is marked noinline.

usage: repeat_step.py IN OUT --repeat R [--repeat R2 ...] [--entry step]
"""

import argparse
import re
import sys
from pathlib import Path


def matching(text, start):
    """Index just past the bracket group that starts at text[start]."""
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    stack = []
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':  # skip string literals
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in pairs:
            stack.append(pairs[c])
        elif c in ")]}>" and not (c == ">" and text[i - 1] == "-"):
            if not stack or stack.pop() != c:
                raise ValueError(f"unbalanced {c!r} at {i}")
            if not stack:
                return i + 1
        i += 1
    raise ValueError("unterminated bracket group")


def split_top(text):
    """Splits a comma-separated list at depth 0."""
    parts, depth, cur = [], 0, ""
    for c in text:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--repeat", type=int, action="append", required=True)
    ap.add_argument("--entry", default="step")
    args = ap.parse_args()
    text = Path(args.input).read_text()

    for m in re.finditer(r'"func\.func"\(\) <\{', text):
        props_end = matching(text, m.end() - 2)
        props = text[m.end() - 2 : props_end]
        if f'sym_name = "{args.entry}"' in props:
            break
    else:
        sys.exit(f"no func.func @{args.entry} in {args.input}")

    # Keep LLVM from inlining the step into the wrappers (copies of a large
    # step would multiply the JIT time): passthrough = ["noinline"].
    region = text.index("(", props_end)
    region_end = matching(text, region)
    after = text[region_end:]
    if after.lstrip().startswith("{"):
        at = region_end + after.index("{") + 1
        text = text[:at] + 'passthrough = ["noinline"], ' + text[at:]
    else:
        text = text[:region_end] + ' {passthrough = ["noinline"]}' + text[region_end:]

    ft = re.search(r"function_type = \(", props)
    ins_end = matching(props, ft.end() - 1)
    inputs = split_top(props[ft.end() : ins_end - 1])
    rest = props[ins_end:].lstrip()
    assert rest.startswith("->")
    rest = rest[2:].lstrip()
    if rest.startswith("("):
        outs_end = matching(rest, 0)
        outputs = split_top(rest[1 : outs_end - 1])
    else:
        outputs = [split_top(rest.split(", res_attrs")[0].split(", sym_name")[0])[0]]

    fn_type = f"({', '.join(inputs)}) -> ({', '.join(outputs)})"
    block_args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(inputs))
    operands = ", ".join(f"%a{i}" for i in range(len(inputs)))
    wrapper = ""
    for repeat in args.repeat:
        # One call site, in a loop (each call site adds JIT time for a step
        # with hundreds of arguments). The results are zeros of the step's
        # result types (the same on every rank): this entry is for timing.
        name = f"{args.entry}_x{repeat}"
        new_props = props.replace(f'sym_name = "{args.entry}"', f'sym_name = "{name}"')
        n = len(outputs)
        outs = ", ".join(outputs)
        lines = [f'"func.func"() {new_props} ({{', f"^bb0({block_args}):"]
        for i, t in enumerate(outputs):
            elem = t.rstrip(">").split("x")[-1].split("<")[-1]
            zero = "0" if elem.startswith(("i", "ui", "si")) else "0.000000e+00"
            lines.append(
                f'  %e{i} = "arith.constant"() <{{value = dense<{zero}> : {t}}}> : () -> {t}'
            )
        lines += [
            '  %lb = "arith.constant"() <{value = 0 : index}> : () -> index',
            f'  %ub = "arith.constant"() <{{value = {repeat} : index}}> : () -> index',
            '  %step = "arith.constant"() <{value = 1 : index}> : () -> index',
            '  "scf.for"(%lb, %ub, %step) ({',
            "  ^bb0(%iv: index):",
            f'    %c:{n} = "func.call"({operands}) <{{callee = @{args.entry}}}> : {fn_type}',
            '    "scf.yield"() : () -> ()',
            "  }) : (index, index, index) -> ()",
        ]
        returned = ", ".join(f"%e{i}" for i in range(n))
        lines.append(f'  "func.return"({returned}) : ({outs}) -> ()')
        lines.append("}) : () -> ()")
        wrapper += "\n".join(lines) + "\n"

    # Insert the wrapper right before the step, inside the same module body.
    at = m.start()
    Path(args.output).write_text(text[:at] + wrapper + text[at:])


if __name__ == "__main__":
    main()
