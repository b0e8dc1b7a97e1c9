"""The GPU check's end-to-end scripts that need no GPU (bench/gpu): the
table from a pack, the runner's reports and torch's timings; torch's
baseline without a GPU (every measurement skipped with the reason)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))

import e2e_table  # noqa: E402
import torch_baseline  # noqa: E402


def _pack():
    def step(name, world, **kw):
        return {"name": name, "kind": "gpu", "world": world, "dtype": "f32", "steps": 5, **kw}

    return {
        "steps": [
            step("one", 1, torch={"model": "gpt256", "autocast": None, "compile": True}),
            step("two", 2, pair="one"),
            step("gpt2-small-bf16", 1, dtype="bf16",
                 torch={"model": "gpt2_small", "autocast": "bf16", "compile": True}),
            step("missing", 1, unavailable="fsdp-compile: error: no"),
        ]
    }  # fmt: skip


def _report(tmp_path, name, ms, world=1, gpus=1, exposed=None):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({
        "median_step_s": ms / 1e3, "world": world, "gpus": gpus,
        "step_exposed_comm_s": [x / 1e3 for x in exposed or [0.0]],
        "comm_per_step": {"calls": 4, "bytes_sent": 2e6, "bytes_received": 2e6},
    }))  # fmt: skip
    return str(path)


def test_the_table_has_ratios_exposed_communication_and_the_goal(tmp_path):
    status = tmp_path / "status.tsv"
    status.write_text(
        f"one\tok\tfine\t{_report(tmp_path, 'one', 2.0)}\n"
        "two\tok\tfine\t"
        f"{_report(tmp_path, 'two', 2.5, world=2, gpus=1, exposed=[0.3, 0.1, 0.2])}\n"
        f"gpt2-small-bf16\tok\tfine\t{_report(tmp_path, 'g', 130.0)}\n"
        "missing\tskipped\tnot in the pack: fsdp-compile: error: no\t\n"
    )
    torch = {"rows": {
        "gpt256|none": {"eager": {"median_ms": 4.0},
                        "compile": {"median_ms": 1.0, "first_call_s": 30}},
        "gpt2_small|bf16": {"eager": {"median_ms": 100.0}, "compile": {"skipped": "budget"}},
    }}  # fmt: skip
    pack = dict(_pack(), built={"commit": "abc123", "date": "today"})
    lines = e2e_table.table(pack, e2e_table.load_status(str(status)), torch)
    assert lines[0] == "pack built today from abc123"
    rows = {ln.split()[0]: ln for ln in lines[3:]}
    assert "0.50x" in rows["one"] and "2.00x" in rows["one"] and "compile 30 s" in rows["one"]
    assert " 0.500* " in rows["two"] and "4 / 2.00 MB" in rows["two"]  # 2.5 - 2.0 ms, shared GPU
    assert " 0.200 " in rows["two"]  # the median of the runner's exposed communication
    assert rows["one"].split()[12] == "-"  # one rank: nothing to expose
    assert (
        "1.30x" in rows["gpt2-small-bf16"]
        and "goal <= 1.2x eager: NOT met" in rows["gpt2-small-bf16"]
    )
    assert "skipped" in rows["missing"] and "fsdp-compile: error: no" in rows["missing"]
    assert any("share the GPU" in ln for ln in lines)


def test_the_table_prints_the_cost_models_estimate_for_the_gpu_it_runs_on(tmp_path):
    pack = _pack()
    pack["steps"][0]["cost_model"] = {"h100": {"estimate_ms": 1.0}, "h200": {"estimate_ms": 4.0}}
    status = tmp_path / "status.tsv"
    status.write_text(f"one\tok\tfine\t{_report(tmp_path, 'one', 2.0)}\n")
    for gpu, model, ratio in (("NVIDIA H100 80GB HBM3, 9.0", "1.000", "2.00x"),
                              ("", "4.000", "0.50x")):  # fmt: skip
        lines = e2e_table.table(pack, e2e_table.load_status(str(status)), {}, gpu)
        assert f"model ms ({'h100' if gpu else 'h200'})" in lines[0]
        rows = {ln.split()[0]: ln.split() for ln in lines[2:]}
        assert rows["one"][5:8] == ["2.000", model, ratio]
        assert rows["two"][6] == "-"  # no estimate in the pack


def test_the_torch_baseline_skips_every_measurement_with_the_reason(tmp_path):
    pack = tmp_path / "pack.json"
    pack.write_text(json.dumps(_pack()))
    out = tmp_path / "torch.json"
    assert torch_baseline.main(["--pack", str(pack), "--out", str(out), "--dry-run"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert sorted(rows) == ["gpt256|none", "gpt2_small|bf16"]
    for row in rows.values():
        assert row["eager"] == {"skipped": "dry run"} and row["compile"] == {"skipped": "dry run"}


BUILD = os.environ.get("FSDP_BUILD_DIR", "")
EMULATED = os.path.join(BUILD, "lib", "cuda-emulation", "libfsdprt.so")


@pytest.mark.skipif(
    not (
        os.path.exists(EMULATED) and os.access(os.path.join(BUILD, "bin", "fsdp-compile"), os.X_OK)
    ),
    reason="the tools or the emulated libfsdprt are not built",
)
def test_packed_emulation_steps_run_with_the_llvm_free_runner_like_the_cpu_path(tmp_path):
    # What the end-to-end stage does with a pack's gpu-emulation=true steps:
    # the runner on the emulated runtime, compared with the CPU path's
    # references (one rank; 2x2 ranks; AdamW with its state on the device).
    pack = tmp_path / "pack"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gpu", "pack_aot.py"), "--out", pack,
         "--build", BUILD, "--emulation", "--only", "emu-mlp-2x2,emu-mlp-train"],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    steps = json.loads((pack / "pack.json").read_text())["steps"]
    assert [s["name"] for s in steps] == ["emu-mlp-2x2", "emu-mlp-train"]
    for s in steps:
        assert "unavailable" not in s, s
        assert s["kind"] == "gpu" and s["gpu"] == {"tf32": False, "emulation": True}
        out = tmp_path / s["name"]
        subprocess.run(
            [sys.executable, "-m", "fsdp_mlir.aot", "run", pack / s["library"], "--runtime",
             EMULATED, "--inputs", pack / s["inputs"], "--outputs", out, "--steps",
             str(s["steps"]), "--report", f"{out}.json"],
            check=True, env=env, cwd=pack / "python",
        )  # fmt: skip
        report = json.loads(open(f"{out}.json").read())
        assert report["device"] == "gpu" and report["world"] == s["world"]
        r = subprocess.run(
            [sys.executable, "-m", "fsdp_mlir.aot", "compare", out, pack / s["reference"],
             "--rtol", str(s["rtol"]), "--metric", s["metric"]],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert r.returncode == 0 and r.stdout.strip().endswith("SAME"), r.stdout
