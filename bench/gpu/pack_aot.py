"""Packs what the GPU check's end-to-end stage needs on a machine without
LLVM or MLIR (bench/gpu/check.sh, docs/AOT.md): every step compiled ahead of
time, its inputs, the CPU path's results as references, the runtime's
sources and the LLVM-free runner, in one directory of at most 64 MiB.

    .venv/bin/python bench/gpu/pack_aot.py [--out build-gpu-pack] [--build build]

Run here, where the compiler is (build/bin/fsdp-opt, fsdp-compile, fsdp-run,
and torch in the interpreter for the PyTorch frontend's GPT). On the GPU
machine, from the copied directory:

    bench/gpu/check.sh          # the pack's own copy: ROOT is the pack

The steps (pack.json lists them): the integration MLP (HSDP 2x2, forward
and backward; and ten AdamW training steps), the integration transformer
(2 ranks) and the PyTorch frontend's GPT (2 ranks). They are lowered with
compute=loops, which needs no BLAS library on the device (compute=fast steps
need libopenblas.so.0 there). The references are fsdp-run's JIT results on
this machine; the AOT step must match them within 1e-5 relative (on the
same CPU they are bit-identical). Steps lowered with compute=gpu join the
pack with kind "gpu" once that lowering exists.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from fsdp_mlir import aot  # noqa: E402

LIMIT = 64 << 20
# The repository files the pack carries (check.sh and what it builds).
SOURCES = ["runtime", "bench/gpu", "python/fsdp_mlir/__init__.py", "python/fsdp_mlir/aot.py"]


def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def copy_sources(out: Path) -> None:
    # Tracked and new (not ignored) files: the working tree as it is.
    files = subprocess.run(
        ["git", "-C", ROOT, "ls-files", "--cached", "--others", "--exclude-standard", *SOURCES],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for f in files:
        dst = out / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst)


class Packer:
    def __init__(self, out: Path, build: Path, python: str):
        self.out, self.bin, self.python = out, build / "bin", python
        self.steps: list[dict] = []
        self.env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))

    def add(
        self, name: str, model: Path, data: Path, pipeline: str, steps: int = 1, extra_inputs=None
    ):
        """Lowers, compiles and runs one step; keeps its library, inputs and
        reference results."""
        d = self.out / "steps" / name
        work = self.out / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        lowered = work / "lowered.mlir"
        run([self.bin / "fsdp-opt", model, f"--fsdp-pipeline={pipeline}", "-o", lowered])
        (d / "inputs").mkdir(parents=True, exist_ok=True)
        run([self.bin / "fsdp-compile", lowered, "-o", d / "step.so", "--mcpu=x86-64"])
        manifest = aot.read_manifest(str(d / "step.so"))
        foreign = [n for n in manifest["needed"] if n != "libfsdprt.so"]
        if foreign:  # the device has the runtime and the C library only
            raise SystemExit(f"pack_aot: step {name} needs {', '.join(foreign)}")
        entry = manifest["entries"][0]
        sources = [data] + ([extra_inputs] if extra_inputs else [])
        for p in entry["args"]:
            found = next(
                (s / f"{p['name']}.npy" for s in sources if (s / f"{p['name']}.npy").exists()), None
            )
            if found is not None:
                shutil.copy2(found, d / "inputs" / found.name)
        run(
            [self.bin / "fsdp-run", lowered, "--inputs", d / "inputs", "--outputs", d / "reference",
             "--steps", steps, "--no-jit-cache"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        self.steps.append(
            {
                "name": name,
                "kind": "cpu",
                "library": f"steps/{name}/step.so",
                "inputs": f"steps/{name}/inputs",
                "reference": f"steps/{name}/reference",
                "steps": steps,
                "world": aot._prod(entry["mesh"]["shape"]),
                "rtol": 1e-5,
                "pipeline": pipeline,
            }
        )

    def gen(self, name: str, argv: list[str], pipeline: str, steps: int = 1):
        work = self.out / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        run(
            [
                self.python,
                "-m",
                "fsdp_mlir.gen",
                *argv,
                "-o",
                work / "m.mlir",
                "--data",
                work / "data",
            ],
            env=self.env,
        )
        if "optimizer=" in pipeline:  # a constant learning rate
            lr = f"import numpy as np; np.save('{work}/data/lr.npy', np.float32(1e-2))"
            run([self.python, "-c", lr])
        self.add(name, work / "m.mlir", work / "data", pipeline, steps)

    def torch_gpt(self, name: str, mesh: str):
        work = self.out / "work" / name
        run(
            [self.python, "-m", "fsdp_mlir.torch", "export", "fsdp_mlir.torch.examples:gpt",
             "--mesh", mesh, "-o", work],
            env=self.env, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        self.add(name, work / "step.mlir", work, "lower=true all-reduce-loss=true compute=loops")


def size_of(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "build-gpu-pack"))
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch frontend's GPT")
    a = ap.parse_args()
    out = Path(a.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    copy_sources(out)
    p = Packer(out, Path(a.build), sys.executable)
    low = "lower=true all-reduce-loss=true compute=loops"
    p.gen("mlp", ["mlp", "--widths", "16,10,7,4", "--batch", "2", "--mesh", "2x2"], low)
    p.gen(
        "mlp-train",
        ["mlp", "--widths", "16,10,7,4", "--batch", "2", "--mesh", "2x2"],
        low + " optimizer=adamw",
        steps=10,
    )
    p.gen(
        "transformer",
        ["transformer", "--attention", "--blocks", "2", "--dim", "16", "--ffn", "32", "--seq", "8",
         "--batch", "2", "--mesh", "2"],
        low,
    )  # fmt: skip
    if not a.no_torch:
        p.torch_gpt("gpt", "2")
    shutil.rmtree(out / "work")
    pack = {"format": "fsdp-gpu-pack", "version": 1, "steps": p.steps}
    (out / "pack.json").write_text(json.dumps(pack, indent=2) + "\n")
    size = size_of(out)
    print(f"pack {out}: {len(p.steps)} steps, {size / (1 << 20):.1f} MiB (limit 64 MiB)")
    if size > LIMIT:
        print(f"pack_aot: {out} is over 64 MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
