"""Packs what the GPU check's end-to-end stage needs on a machine without
LLVM or MLIR (bench/gpu/check.sh, docs/AOT.md): every step compiled ahead of
time, its inputs, the CPU path's results as references, the runtime's
sources and the LLVM-free runner, in one directory of at most 64 MiB.

    .venv/bin/python bench/gpu/pack_aot.py [--out build-gpu-pack] [--build build]

Run here, where the compiler is (build/bin/fsdp-opt, fsdp-compile, fsdp-run,
and torch in the interpreter for the PyTorch frontend's GPT). On the GPU
machine, from the copied directory:

    bench/gpu/check.sh          # the pack's own copy: ROOT is the pack

The steps (pack.json lists them; docs/AOT.md has the table): CPU steps
(kind "cpu", compute=loops, which needs no BLAS library on the device): the
integration MLP (HSDP 2x2; and ten AdamW training steps), the integration
transformer (2 ranks) and the PyTorch frontend's GPT (2 ranks), with
fsdp-run's JIT results here as references (elementwise within 1e-5; on the
same CPU bit-identical). GPU steps (kind "gpu", compute=gpu): the MLP, the
transformer and the frontend's GPTs (bench/gpu/models.py) on one and two
ranks, fp32 and bf16, with the CPU path's results (compute=loops, the same
options) as references, in the 2-norm within 1e-5 (fp32) or 1e-2 (bf16);
and GPT-2 small (one GPU, 8 x 1024 tokens, fp32 and param-dtype=bf16),
exported on fake tensors (bench/gpu/export_fake.py), whose inputs and
torch reference are made on the GPU machine (bench/gpu/gpt2_inputs.py). A
GPU step that does not lower or compile is packed as "unavailable" with
the reason, which the stage reports as skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from fsdp_mlir import aot

LIMIT = 64 << 20
# The repository files the pack carries (check.sh and what it builds).
SOURCES = [
    "runtime",
    # The runner without the JIT, built by runtime/ alone (Runner.cmake).
    "lib/Runner",
    "lib/Layout",
    "include/fsdp/Runner",
    "include/fsdp/Layout",
    "tools/fsdp-run",
    "bench/gpu",
    "python/fsdp_mlir/__init__.py",
    "python/fsdp_mlir/aot.py",
    "python/fsdp_mlir/runner.py",  # aot.py's ctypes binding of libfsdprun
    "python/fsdp_mlir/torch/examples.py",  # bench/gpu/models.py's GPT
]
MODELS = str(ROOT / "bench" / "gpu" / "models.py")


# The GPUs whose estimates a compute=gpu step carries (fsdp-gpu-cost-report).
COST_GPUS = ("a100", "h100", "h200")
# estimate_ms is the graph replay of a capturable step, else streamed_ms.
COST_FIELDS = ("estimate_ms", "streamed_ms", "graph_ms", "capturable", "ideal_ms", "launches", "gemm_calls",
               "memcpys", "device_allocations", "host_synchronizations")  # fmt: skip


def cost_model_summary(report: str) -> dict:
    """{gpu: {estimate_ms, ideal_ms, counts}} from the report's JSON (the
    step: the function with the most launches)."""
    out = {}
    for r in json.loads(report)["reports"]:
        if r["functions"]:
            f = max(r["functions"], key=lambda f: f["launches"] + f["gemm_calls"])
            out[r["gpu"]] = {k: f[k] for k in COST_FIELDS}
    return out


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def copy_sources(out: Path) -> None:
    # Tracked and new (not ignored) files: the working tree as it is.
    files = subprocess.run(
        [
            "git",
            "-C",
            ROOT,
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            *SOURCES,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for f in files:
        dst = out / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst)
    # GoogleTest's sources for the GPU tests (the GPU machine has no package
    # registry): scripts/setup.sh's copy, else Debian's googletest package.
    for gtest in (ROOT / "third_party" / "googletest", Path("/usr/src/googletest")):
        if (gtest / "googletest" / "CMakeLists.txt").is_file():
            shutil.copytree(
                gtest,
                out / "third_party" / "googletest",
                dirs_exist_ok=True,
                ignore=shutil.ignore_patterns("googlemock"),
            )
            break


def _first_error(text: str) -> str:
    """The first diagnostic of a tool's output, one line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    pick = next(
        (ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "failed"
    )
    pick = re.sub(r'^loc\("[^"]*":\d+:\d+\): ', "", pick)  # the work directory's path
    return pick if len(pick) <= 240 else pick[:237] + "..."


# What a GPU step may need besides the runtime (the GPU machine has the
# toolkit's CUDA runtime and cuBLAS).
GPU_LIBRARIES = ("libfsdprt.so", "libcudart.so", "libcublas.so", "libcublasLt.so")


class Packer:
    def __init__(
        self, out: Path, build: Path, python: str, gpu_chip: str = "sm_90", gpu_link=()
    ):
        self.out, self.bin, self.python = out, build / "bin", python
        self.gpu_chip, self.gpu_link = gpu_chip, list(gpu_link)
        self.only: set[str] | None = None  # --only: these steps
        self.steps: list[dict] = []
        self.env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))

    def _compile(self, lowered: Path, library: Path, kind: str) -> str | None:
        """fsdp-compile; the reason when it fails (a GPU step is then packed
        as unavailable, a CPU step stops the pack)."""
        cmd = [self.bin / "fsdp-compile", lowered, "-o", library, "--mcpu=x86-64"]
        if kind == "gpu":  # the step's device calls go through libfsdprt
            cmd += [f"--link={lib}" for lib in self.gpu_link]
        print("+", " ".join(str(c) for c in cmd), flush=True)
        r = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, check=False
        )
        if r.returncode != 0:
            if kind == "cpu":
                sys.stderr.write(r.stdout + r.stderr)
                raise SystemExit(f"pack_aot: fsdp-compile failed for {lowered}")
            return "fsdp-compile: " + _first_error(r.stderr + r.stdout)
        manifest = aot.read_manifest(str(library))
        allowed = ("libfsdprt.so",) if kind == "cpu" else GPU_LIBRARIES
        foreign = [n for n in manifest["needed"] if not n.startswith(allowed)]
        if foreign:  # the device has the runtime and the C library only
            raise SystemExit(f"pack_aot: {library} needs {', '.join(foreign)}")
        return None

    def _lower(
        self, model: Path, pipeline: str, out: Path, cost: dict | None = None
    ) -> str | None:
        """fsdp-opt; with ``cost`` (a compute=gpu step's pack entry), the
        same lowering prints the cost model's estimate for each GPU of
        COST_GPUS (fsdp-gpu-cost-report, docs/GPU.md), kept in the entry's
        "cost_model" so that the table prints it next to the measured time."""
        if cost is not None:
            pipeline += (
                f" gpu-cost-report={','.join(COST_GPUS)} gpu-cost-report-json=true"
            )
        cmd = [self.bin / "fsdp-opt", model, f"--fsdp-pipeline={pipeline}", "-o", out]
        print("+", " ".join(str(c) for c in cmd), flush=True)
        r = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, check=False
        )
        if r.returncode != 0:
            return "fsdp-opt: " + _first_error(r.stderr + r.stdout)
        if cost is not None:
            cost["cost_model"] = cost_model_summary(r.stdout)
        return None

    def add(
        self,
        name: str,
        model: Path,
        data: Path,
        pipeline: str,
        steps: int = 1,
        extra_inputs=None,
        kind: str = "cpu",
        reference_pipeline: str | None = None,
        dtype: str = "f32",
        skip_reference: bool = False,
        share_inputs_with: str | None = None,
        **extra,
    ):
        """Lowers, compiles and runs one step; keeps its library, inputs and
        reference results. A GPU step's reference is the CPU path's result
        of the same step (``reference_pipeline``: compute=loops, the other
        options the same)."""
        d = self.out / "steps" / name
        work = self.out / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        entry = {
            "name": name,
            "kind": kind,
            "library": f"steps/{name}/step.so",
            "inputs": f"steps/{name}/inputs",
            "reference": f"steps/{name}/reference",
            "steps": steps,
            "world": None,
            "dtype": dtype,
            # CPU steps are bit-identical; a GPU step sums in another order
            # (cuBLAS, warp reductions): each result within rtol in the
            # 2-norm (docs/AOT.md).
            "rtol": 1e-5 if dtype == "f32" else 1e-2,
            "metric": "elementwise" if kind == "cpu" else "norm",
            "pipeline": pipeline,
            **extra,
        }
        self.steps.append(entry)
        lowered = work / "lowered.mlir"
        why = None
        cpu_reference = None
        if reference_pipeline is not None and not skip_reference:
            # The CPU path first, from the source inputs: it is checked even
            # when the GPU step does not compile.
            entry["reference_pipeline"] = reference_pipeline
            cpu_reference = work / "reference"
            why = self._reference(
                model, reference_pipeline, data, steps, work, cpu_reference
            )
        if why is None:
            gpu_step = kind == "gpu" and "gpu-emulation=true" not in pipeline
            why = self._lower(
                model, pipeline, lowered, cost=entry if gpu_step else None
            )
        if why is None:
            (d / "inputs").mkdir(parents=True, exist_ok=True)
            why = self._compile(lowered, d / "step.so", kind)
        if why is not None:
            if kind == "cpu":
                raise SystemExit(f"pack_aot: {name}: {why}")
            print(f"pack_aot: {name} is not packed: {why}", file=sys.stderr)
            entry["unavailable"] = why
            shutil.rmtree(d, ignore_errors=True)
            return
        manifest = aot.read_manifest(str(d / "step.so"))
        port = manifest["entries"][0]
        entry["world"] = math.prod(port["mesh"]["shape"])
        entry["gpu"] = aot.gpu_info(manifest, str(d / "step.so"))
        if (kind == "gpu") != (entry["gpu"] is not None):
            raise SystemExit(
                f"pack_aot: {name}: a {kind} step, but the library says otherwise"
            )
        shared = self.out / "steps" / str(share_inputs_with) / "inputs"
        if (
            share_inputs_with and shared.is_dir()
        ):  # the same files, packed once (64 MiB)
            shutil.rmtree(d / "inputs")
            entry["inputs"] = f"steps/{share_inputs_with}/inputs"
        sources = [data] + ([extra_inputs] if extra_inputs else [])
        for p in [] if entry["inputs"] != f"steps/{name}/inputs" else port["args"]:
            found = next(
                (
                    s / f"{p['name']}.npy"
                    for s in sources
                    if (s / f"{p['name']}.npy").exists()
                ),
                None,
            )
            if found is not None:
                shutil.copy2(found, d / "inputs" / found.name)
        if skip_reference:  # made where the step runs
            return
        if cpu_reference is not None:
            shutil.move(str(cpu_reference), str(d / "reference"))
            return
        run(
            [self.bin / "fsdp-run", lowered, "--inputs", self.out / entry["inputs"],
             "--outputs", d / "reference", "--steps", steps, "--no-jit-cache"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip

    def _reference(self, model, pipeline, data, steps, work, out) -> str | None:
        """The CPU path's results of the step (fsdp-run's JIT); the reason
        when it cannot run."""
        lowered = work / "reference.mlir"
        why = self._lower(model, pipeline, lowered)
        if why is not None:
            return f"the CPU reference: {why}"
        cmd = [self.bin / "fsdp-run", lowered, "--inputs", data, "--outputs", out,
               "--steps", steps, "--no-jit-cache"]  # fmt: skip
        print("+", " ".join(str(c) for c in cmd), flush=True)
        r = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, check=False
        )
        if r.returncode != 0:
            return "the CPU reference: fsdp-run: " + _first_error(r.stderr + r.stdout)
        return None

    def wanted(self, name: str) -> bool:
        return self.only is None or name in self.only

    def gen(self, name: str, argv: list[str], pipeline: str, steps: int = 1, **kw):
        if not self.wanted(name):
            return
        work = self.out / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        if not (work / "m.mlir").exists():
            run(
                [self.python, "-m", "fsdp_mlir.dev.gen", *argv, "-o", work / "m.mlir", "--data",
                 work / "data"],
                env=self.env,
            )  # fmt: skip
        if "optimizer=" in pipeline:  # a constant learning rate
            lr = f"import numpy as np; np.save('{work}/data/lr.npy', np.float32(1e-2))"
            run([self.python, "-c", lr])
        self.add(name, work / "m.mlir", work / "data", pipeline, steps, **kw)

    def export(self, spec: str, mesh: str, fake: bool = False) -> Path:
        """The frontend's export of a spec (once per spec and mesh); traced
        on fake tensors with ``fake`` (bench/gpu/export_fake.py)."""
        tag = "-fake" if fake else ""
        work = self.out / "work" / f"export-{spec.rsplit(':', 1)[-1]}-{mesh}{tag}"
        if not (work / "step.mlir").exists():
            how = [str(ROOT / "bench" / "gpu" / "export_fake.py")] if fake else [
                "-m", "fsdp_mlir.torch", "export"]  # fmt: skip
            run(
                [self.python, *how, spec, "--mesh", mesh, "-o", work],
                env=self.env, stdout=subprocess.DEVNULL,
            )  # fmt: skip
        return work

    def torch_gpt(
        self,
        name: str,
        mesh: str,
        spec="fsdp_mlir.torch.examples:gpt",
        pipeline=None,
        **kw,
    ):
        if not self.wanted(name):
            return
        work = self.export(spec, mesh)
        pipeline = pipeline or "lower=true all-reduce-loss=true compute=loops"
        self.add(name, work / "step.mlir", work, pipeline, **kw)

    def gpu(
        self,
        name: str,
        how: str,
        what,
        options: str = "",
        steps: int = 1,
        emulation=False,
        **kw,
    ):
        """A compute=gpu step (kind "gpu") with the CPU path's reference:
        ``how`` is "gen" (what: the generator's argv) or "torch" (what: a
        spec of bench/gpu/models.py, with its mesh). ``emulation``: lowered
        with gpu-emulation=true (kernels as host functions, for the
        emulated runtime)."""
        if not self.wanted(name):
            return
        common = "lower=true all-reduce-loss=true" + (f" {options}" if options else "")
        pipeline = f"{common} compute=gpu gpu-chip={self.gpu_chip}"
        if emulation:
            pipeline += " gpu-emulation=true"
        reference = f"{common} compute=loops"
        bf16 = "param-dtype=bf16" in options or (how == "gen" and "bf16" in what)
        dtype = "bf16" if bf16 else "f32"
        kw.update(kind="gpu", reference_pipeline=reference, dtype=dtype)
        if how == "gen":
            self.gen(name, what, pipeline, steps, **kw)
        else:
            spec, mesh = what
            work = kw.pop("export", None) or self.export(f"{MODELS}:{spec}", mesh)
            self.add(name, work / "step.mlir", work, pipeline, steps, **kw)


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


GPT2_NOTE = "the pack was built without GPT-2 (--no-gpt2, or no transformers where it was built)"


def gpt2_steps(p: Packer, enabled: bool) -> None:
    """GPT-2 small (one GPU, 8 x 1024 tokens), fp32 and param-dtype=bf16.
    Its 124M parameters (500 MB) do not travel: the pack holds the step
    libraries and the export's model.json; on the GPU machine
    bench/gpu/gpt2_inputs.py builds the same model from its seeds
    (transformers), writes the inputs and torch's own fp32 result on the
    GPU as the reference."""
    fake_checked = False
    for name, options, autocast in (
        ("gpt2-small", "", None),
        ("gpt2-small-bf16", "param-dtype=bf16", "bf16"),
    ):
        extra = {
            "inputs_from": "gpt2_inputs",  # generated there, with the reference
            # torch.compile for the bf16 row (the goal: <= 1.2x eager).
            "torch": {
                "model": "gpt2_small",
                "autocast": autocast,
                "compile": bool(autocast),
            },
        }
        if not p.wanted(name):
            continue
        if not enabled:
            p.steps.append(
                {"name": name, "kind": "gpu", "dtype": "bf16" if autocast else "f32", "steps": 3,
                 "world": 1, "rtol": 1e-5 if not autocast else 1e-2, "metric": "norm",
                 "unavailable": GPT2_NOTE, **extra}
            )  # fmt: skip
            continue
        if not fake_checked:
            # Fake tensors must give the real trace's MLIR (GPT-2's
            # architecture at a small size) before the large one uses them.
            real = p.export(f"{MODELS}:gpt2_tiny", "1")
            fake = p.export(f"{MODELS}:gpt2_tiny", "1", fake=True)
            if (real / "step.mlir").read_bytes() != (fake / "step.mlir").read_bytes():
                raise SystemExit(
                    "pack_aot: tracing GPT-2 on fake tensors gives another MLIR"
                )
            fake_checked = True
        work = p.export(f"{MODELS}:gpt2_small", "1", fake=True)
        p.gpu(name, "torch", ("gpt2_small", "1"), options, steps=3, skip_reference=True,
              export=work, **extra)  # fmt: skip
        d = p.out / "steps" / name
        if d.exists():
            for f in d.glob("inputs/*.npy"):  # generated there
                f.unlink()
            shutil.copy2(work / "model.json", d / "model.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "build-gpu-pack"))
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument(
        "--no-torch", action="store_true", help="leave out the PyTorch frontend's GPTs"
    )
    ap.add_argument(
        "--no-gpu", action="store_true", help="leave out the compute=gpu steps"
    )
    ap.add_argument("--no-gpt2", action="store_true", help="leave out GPT-2 small")
    ap.add_argument(
        "--gpu-chip", default="sm_90", help="the GPU's architecture (H100/H200: sm_90)"
    )
    ap.add_argument(
        "--gpu-link", action="append", default=[],
        help="another library for GPU steps' fsdp-compile --link (e.g. "
        "/usr/local/cuda/lib64/stubs/libcuda.so); repeatable",
    )  # fmt: skip
    ap.add_argument(
        "--emulation", action="store_true",
        help="also the emu-* steps: compute=gpu gpu-emulation=true, for the emulated runtime",
    )  # fmt: skip
    ap.add_argument("--only", help="only these steps (comma-separated names)")
    a = ap.parse_args()
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    copy_sources(out)
    p = Packer(out, Path(a.build), sys.executable, a.gpu_chip, a.gpu_link)
    if a.only:
        p.only = set(a.only.split(","))
    low = "lower=true all-reduce-loss=true compute=loops"
    mlp = ["mlp", "--widths", "16,10,7,4", "--batch", "2"]
    tr = ["transformer", "--attention", "--blocks", "2", "--dim", "16", "--ffn", "32", "--seq", "8",
          "--batch", "2"]  # fmt: skip
    p.gen("mlp", mlp + ["--mesh", "2x2"], low)  # (--only: gen skips the others)
    p.gen("mlp-train", mlp + ["--mesh", "2x2"], low + " optimizer=adamw", steps=10)
    p.gen("transformer", tr + ["--mesh", "2"], low)
    if not a.no_torch:
        p.torch_gpt("gpt", "2")
    if not a.no_gpu:
        # One GPU each unless named -2 / -2x2 (the same work per rank as the
        # one-rank step they pair with: the difference of their step times is
        # the communication they expose). Five steps: the first loads the
        # kernels; the report's median is a warm step.
        p.gpu("gpu-mlp", "gen", mlp + ["--mesh", "1"], steps=5)
        p.gpu("gpu-mlp-2x2", "gen", mlp + ["--mesh", "2x2"], steps=5, pair="gpu-mlp")
        p.gpu(
            "gpu-mlp-train", "gen", mlp + ["--mesh", "1"], "optimizer=adamw", steps=10
        )
        p.gpu("gpu-transformer", "gen", tr + ["--mesh", "1"], steps=5)
        p.gpu(
            "gpu-transformer-2",
            "gen",
            tr + ["--mesh", "2"],
            steps=5,
            pair="gpu-transformer",
        )
        p.gpu(
            "gpu-transformer-bf16",
            "gen",
            tr + ["--mesh", "1", "--dtype", "bf16"],
            steps=5,
        )
        if not a.no_torch:
            p.gpu(
                "gpu-gpt",
                "torch",
                ("gpt", "1"),
                steps=5,
                torch={"model": "gpt", "autocast": None},
            )
            p.gpu("gpu-gpt-2", "torch", ("gpt_2ranks", "2"), steps=5, pair="gpu-gpt")
            g256 = {"model": "gpt256", "autocast": None, "compile": True}
            p.gpu("gpu-gpt256", "torch", ("gpt256", "1"), steps=5, torch=g256)
            p.gpu(
                "gpu-gpt256-2",
                "torch",
                ("gpt256_2ranks", "2"),
                steps=5,
                pair="gpu-gpt256",
            )
            p.gpu("gpu-gpt256-bf16", "torch", ("gpt256", "1"), "param-dtype=bf16", steps=5,
                  torch={"model": "gpt256", "autocast": "bf16"},
                  share_inputs_with="gpu-gpt256")  # fmt: skip
            gpt2_steps(
                p,
                not a.no_gpt2 and importlib.util.find_spec("transformers") is not None,
            )
    if a.emulation:
        # The device path without a GPU: kernels as host functions, run on
        # the emulated runtime (FSDP_EMULATED_RUNTIME in the stage).
        p.gpu("emu-mlp", "gen", mlp + ["--mesh", "1"], steps=3, emulation=True)
        p.gpu("emu-mlp-2x2", "gen", mlp + ["--mesh", "2x2"], steps=3, emulation=True)
        p.gpu("emu-mlp-train", "gen", mlp + ["--mesh", "1"], "optimizer=adamw", steps=5,
              emulation=True)  # fmt: skip
        p.gpu("emu-transformer", "gen", tr + ["--mesh", "2"], steps=3, emulation=True)
    shutil.rmtree(out / "work")
    commit = subprocess.run(
        ["git", "-C", ROOT, "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    built = {
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    pack = {"format": "fsdp-gpu-pack", "version": 1, "built": built, "steps": p.steps}
    (out / "pack.json").write_text(json.dumps(pack, indent=2) + "\n")
    size = size_of(out)
    gpu = [s for s in p.steps if s["kind"] == "gpu"]
    missing = [s for s in gpu if "unavailable" in s]
    print(
        f"pack {out}: {len(p.steps)} steps ({len(gpu)} GPU steps, {len(missing)} of them not "
        f"compiled), {size / (1 << 20):.1f} MiB (limit 64 MiB)"
    )
    for s in missing:
        print(f"  {s['name']}: {s['unavailable']}")
    if size > LIMIT:
        print(f"pack_aot: {out} is over 64 MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
