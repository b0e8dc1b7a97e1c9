#!/usr/bin/env python3
"""Compiles the runtime's hand-written CUDA kernels (runtime/cuda/*.cu) for
one chip with `nvcc -Xptxas -v` and prints, per kernel, its registers,
spill bytes and stack frame (docs/GPU.md, "What is checked without a
GPU"). Exits 1 when a file does not compile or a kernel whose name matches
--no-spills spills or has a stack frame, 77 (skipped) when the CUDA toolkit
is absent.

    scripts/runtime-kernel-check.py [--cuda DIR] [--chip sm_90]
        [--no-spills REGEX] [FILE.cu ...]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77
FILES = ["attention_kernels.cu", "attention_mma_kernels.cu", "scatter_kernels.cu", "grouped_kernels.cu",
         "split_k_kernels.cu"]

FUNCTION = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")


def demangle(names):
    """Readable kernel names: the template and its arguments, no namespace."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return names
    p = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=False)
    out = p.stdout.splitlines() if p.returncode == 0 else names
    out = [n.replace("(anonymous namespace)::", "") for n in out]
    return [re.sub(r"^void |\(.*$", "", n) for n in out]


def kernels(info):
    """(mangled name, registers, spill bytes, stack bytes) per kernel of
    ptxas -v's report."""
    rows, name, frame = [], None, None
    for line in info.splitlines():
        if m := FUNCTION.search(line):
            name, frame = m.group(1), None
        elif (m := FRAME.search(line)) and name:
            frame = (int(m.group(1)), int(m.group(2)) + int(m.group(3)))
        elif (m := USED.search(line)) and name and frame:
            rows.append((name, int(m.group(1)), frame[1], frame[0]))
            name = None
    return rows


def check(path, args):
    cmd = [os.path.join(args.cuda, "bin", "nvcc"), f"-arch={args.chip}", "-std=c++17", "-c", path,
           "-o", os.devnull, "-Xptxas", "-v"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode:
        print(f"FAIL {os.path.basename(path)}: nvcc failed\n{p.stderr.strip()[-2000:]}")
        return False
    rows = kernels(p.stdout + p.stderr)
    ok = True
    for (mangled, regs, spills, stack), name in zip(rows, demangle([r[0] for r in rows])):
        bad = (spills or stack) and re.search(args.no_spills, name)
        ok = ok and not bad
        print(f"{'SPILL' if bad else 'ok   '} {name:<44} regs {regs:3d}  spills {spills:4d} B  stack {stack:4d} B")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuda", default=os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    ap.add_argument("--chip", default="sm_90")
    ap.add_argument("--no-spills", default="", help="kernels (regex on the name) that must not spill")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if not os.access(os.path.join(args.cuda, "bin", "nvcc"), os.X_OK):
        print(f"SKIP: no nvcc under {args.cuda}; set --cuda or CUDA_HOME")
        return SKIP
    files = args.files or [os.path.join(ROOT, "runtime", "cuda", f) for f in FILES]
    results = [check(f, args) for f in files]  # every file, even after a failure
    ok = all(results)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
