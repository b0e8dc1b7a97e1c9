#!/usr/bin/env python3
"""Compiles every integration test's step with compute=gpu and runs ptxas on
every generated kernel (docs/GPU.md, "What is checked without a GPU").

The steps are the ones the integration tests build: each
test/Integration/*.test's `fsdp_mlir.dev.gen` step with each of its lowering
pipelines, every case of the MLP suite, and the PyTorch frontend's GPT
and sparse-MoE exports (when torch is importable). Each is lowered with
`compute=gpu gpu-format=isa` (the other pipeline options unchanged), its
kernels' PTX is taken from the `gpu.binary` ops and assembled with
`ptxas -arch=<chip> -v`. A step passes when it lowers, every kernel
targets the chip, no `__nv_*` libdevice call is left unresolved, and ptxas
accepts every kernel. Prints one line per step (kernels, cuBLAS calls,
registers, spills, compile times with compute=gpu and compute=fast) and a
summary; exits 1 if a step fails, 77 (skipped) when the CUDA toolkit is
absent.
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77


def integration_steps():
    """(name, generator arguments, pipeline options) of every lowered step
    that the integration tests build with fsdp_mlir.dev.gen."""
    steps = []
    tests = os.path.join(ROOT, "test", "Integration")
    gen_re = re.compile(r"fsdp_mlir\.(?:dev\.)?gen (.*?) -o %t/(\w+)\.mlir")
    opt_re = re.compile(r'fsdp-opt %t/(\w+)\.mlir --fsdp-pipeline="([^"]*)"')
    for name in sorted(os.listdir(tests)):
        # The compute=gpu tests themselves (gpu-*.test) build no other step.
        if not name.endswith(".test") or name.startswith("gpu-"):
            continue
        with open(os.path.join(tests, name)) as f:
            text = f.read()
        gens = {m.group(2): m.group(1) for m in gen_re.finditer(text)}
        for m in opt_re.finditer(text):
            source, options = m.group(1), m.group(2)
            if source in gens and "lower=true" in options.split():
                steps.append((name[: -len(".test")], gens[source], options))
    sys.path.insert(0, os.path.join(tests, "Inputs"))
    try:
        import mlp_suite

        for case, (_what, gen, meshes) in mlp_suite.CASES.items():
            mesh = meshes[max(meshes)]
            steps.append(
                (f"mlp/{case}", f"mlp {gen} --batch 2 --mesh {mesh}", "lower=true all-reduce-loss=true")
            )
    except ImportError:
        pass  # lit is not importable: the suite's cases are skipped
    return steps


def with_compute(options, *compute):
    """The pipeline options with their compute= option replaced by `compute`."""
    return " ".join([o for o in options.split() if not o.startswith("compute=")] + list(compute))


def gpu_options(options, chip, cuda):
    return with_compute(options, "compute=gpu", "gpu-format=isa", f"gpu-chip={chip}", f"cuda-path={cuda}")


def fast_options(options):
    return with_compute(options, "compute=fast")


def unescape(s):
    """An MLIR string attribute's text (\\\\ and \\HH escapes) as bytes."""
    out = bytearray()
    i = 0
    while i < len(s):
        if s[i] == "\\":
            if s[i + 1] == "\\":
                out.append(0x5C)
                i += 2
            else:
                out.append(int(s[i + 1 : i + 3], 16))
                i += 3
        else:
            out += s[i].encode()
            i += 1
    return bytes(out)


def kernels_of(lowered):
    """The PTX of every kernel of a module lowered with gpu-format=isa."""
    return [unescape(m.group(1)) for m in re.finditer(r'assembly = "((?:[^"\\]|\\.)*)"', lowered)]


PTXAS_INFO = re.compile(r"Used (\d+) registers")
SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
ENTRY = re.compile(rb"\.entry\s+(\w+)")


class Ptxas:
    """ptxas -v on one module's PTX (every kernel of a step), memoized by
    the PTX's hash."""

    def __init__(self, ptxas, chip, workdir):
        self.ptxas, self.chip, self.workdir = ptxas, chip, workdir
        self.cache = {}

    def check(self, ptx):
        key = hashlib.sha1(ptx).hexdigest()
        if key not in self.cache:
            # One file per call: concurrent steps may assemble the same PTX.
            fd, path = tempfile.mkstemp(suffix=".ptx", dir=self.workdir)
            os.close(fd)
            with open(path, "wb") as f:
                f.write(ptx)
            p = subprocess.run(
                [self.ptxas, f"-arch={self.chip}", "-v", path, "-o", os.devnull],
                capture_output=True,
                text=True,
                check=False,
            )
            info = p.stdout + p.stderr
            regs = [int(r) for r in PTXAS_INFO.findall(info)]
            spills = [int(a) + int(b) for a, b in SPILLS.findall(info)]
            self.cache[key] = {
                "ok": p.returncode == 0,
                "error": info.strip() if p.returncode else "",
                "kernels": len(ENTRY.findall(ptx)),
                "registers": regs,
                "spills": spills,
            }
        return self.cache[key]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)


def check_step(step, args, ptxas, env):
    name, gen, options = step
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        model = os.path.join(tmp, "m.mlir")
        g = run([args.python, "-m", "fsdp_mlir.dev.gen"] + shlex.split(gen) + ["-o", model, "--data", os.path.join(tmp, "data")], env=env)
        if g.returncode:
            return {"name": name, "ok": False, "error": "generator failed: " + g.stderr.strip()}
        return check_module(name, model, options, args, ptxas, tmp)


def check_module(name, model, options, args, ptxas, tmp):
    opt = os.path.join(args.build, "bin", "fsdp-opt")
    result = {"name": name, "options": options}
    t0 = time.perf_counter()
    p = run([opt, model, f"--fsdp-pipeline={gpu_options(options, args.chip, args.cuda)}"])
    result["compile_gpu_s"] = time.perf_counter() - t0
    if p.returncode:
        result.update(ok=False, error="compute=gpu failed: " + p.stderr.strip()[-2000:])
        return result
    lowered = p.stdout
    if args.timing:
        t0 = time.perf_counter()
        run([opt, model, f"--fsdp-pipeline={fast_options(options)}", "-o", os.devnull])
        result["compile_fast_s"] = time.perf_counter() - t0
    ptx = kernels_of(lowered)
    result["gemm_calls"] = len(re.findall(r"llvm\.call @fsdprt_gpu_gemm_\w+\(", lowered))
    result["gemm_f32"] = len(re.findall(r"llvm\.call @fsdprt_gpu_gemm_f32\(", lowered))
    errors = []
    # A step computing in bf16 (fsdp-autocast) has no f32 gemm left.
    words = options.split()
    bf16_compute = "param-dtype=bf16" in words and "mixed-precision=traffic" not in words
    if bf16_compute and result["gemm_f32"]:
        errors.append(f"{result['gemm_f32']} f32 gemm(s) in a param-dtype=bf16 step")
    if any(f".target {args.chip}".encode() not in k for k in ptx):
        errors.append(f"a kernel does not target {args.chip}")
    if any(re.search(rb"\.extern \.func[^;]*__nv_", k) for k in ptx):
        errors.append("an unresolved libdevice (__nv_*) call")
    infos = [ptxas.check(k) for k in ptx]
    errors += [i["error"] for i in infos if not i["ok"]]
    regs = [r for i in infos for r in i["registers"]]
    spills = [b for i in infos for b in i["spills"]]
    result["binaries"] = len(ptx)
    result["kernels"] = sum(i["kernels"] for i in infos)
    result["max_registers"] = max(regs, default=0)
    result["mean_registers"] = sum(regs) / len(regs) if regs else 0
    result["spill_bytes"] = sum(spills)
    result["spilling_kernels"] = sum(1 for b in spills if b)
    result["ok"] = not errors
    if errors:
        result["error"] = "; ".join(errors)[:2000]
    return result


def torch_step(example, mesh, args, env, workdir):
    """A PyTorch frontend example (fsdp_mlir.torch.examples:<example>),
    exported (None without torch)."""
    out = os.path.join(workdir, example)
    target = f"fsdp_mlir.torch.examples:{example}"
    p = run([args.python, "-m", "fsdp_mlir.torch", "export", target, "--mesh", mesh, "-o", out], env=env)
    if p.returncode:
        return None
    return os.path.join(out, "step.mlir")


# The PyTorch frontend's examples the check exports: GPT, and the sparse
# mixture of experts (the device grouped gemm's step).
TORCH_STEPS = (("gpt", "2x4"), ("moe", "2"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--cuda", default=os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    ap.add_argument("--chip", default="sm_90")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("FSDP_JOBS", "2")))
    ap.add_argument("--timing", action="store_true", help="also time compute=fast per step")
    ap.add_argument("--filter", default="", help="only steps whose name contains this")
    ap.add_argument("--json", help="write the per-step results here")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    ptxas_path = os.path.join(args.cuda, "bin", "ptxas")
    if not os.access(ptxas_path, os.X_OK):
        print(f"SKIP: no CUDA toolkit at {args.cuda} (no executable {ptxas_path}); set --cuda or CUDA_HOME")
        return SKIP
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        args.workdir = workdir
        ptxas = Ptxas(ptxas_path, args.chip, workdir)
        steps = [s for s in integration_steps() if args.filter in s[0]]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda s: check_step(s, args, ptxas, env), steps))
        for example, mesh in TORCH_STEPS:
            name = f"torch/{example}"
            if args.filter not in name:
                continue
            model = torch_step(example, mesh, args, env, workdir)
            if model:
                results.append(check_module(name, model, "lower=true all-reduce-loss=true", args, ptxas, workdir))
            else:
                print(f"note: {name} skipped (the PyTorch frontend could not export it: no torch?)")
    for r in results:
        if r["ok"]:
            line = (
                f"ok   {r['name']:<40} kernels {r['kernels']:3d}  gemms {r['gemm_calls']:3d} "
                f"(f32 {r['gemm_f32']:3d})  "
                f"max regs {r['max_registers']:3d}  spills {r['spill_bytes']:4d} B  "
                f"gpu {r['compile_gpu_s']:.2f} s"
            )
            if "compile_fast_s" in r:
                line += f"  fast {r['compile_fast_s']:.2f} s"
            print(line)
        else:
            print(f"FAIL {r['name']:<40} {r.get('options', '')}\n     {r['error']}")
    failed = [r for r in results if not r["ok"]]
    kernels = sum(r.get("kernels", 0) for r in results)
    spilling = sum(r.get("spilling_kernels", 0) for r in results)
    regs = max((r.get("max_registers", 0) for r in results), default=0)
    print(
        f"{len(results) - len(failed)} of {len(results)} steps pass; {kernels} kernels "
        f"assembled by ptxas -arch={args.chip}: at most {regs} registers, {spilling} spill"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
