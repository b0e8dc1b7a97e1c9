"""Training a PyTorch GPT with the compiled step: export -> fsdp-opt with
AdamW -> fsdp-run --steps N on HSDP 2x4 with uneven widths, one batch file
per step and a learning-rate schedule; every step's loss and the final
parameters against torch.optim.AdamW on the global batch (float32)."""

import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402

from fsdp_mlir.torch.examples import gpt_training  # noqa: E402
from fsdp_mlir.torch.train import compare_training, export_training, train_reference  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
)

STEPS = 20


def test_gpt_adamw_hsdp_2x4(tmp_path):
    t = gpt_training(STEPS)
    module, loss_fn, batches, cfg, lrs = (
        t["module"],
        t["loss_fn"],
        t["batches"],
        t["optimizer"],
        t["lrs"],
    )
    out = tmp_path / "gpt"
    model = export_training(
        module, loss_fn, batches, out, cfg, lrs, mesh="2x4", units=t["units"], policy="balanced"
    )
    lowered, results = out / "lowered.mlir", out / "results"
    subprocess.run(
        [
            T.tool("fsdp-opt"),
            out / "step.mlir",
            f"--fsdp-pipeline={model['train_pipeline']}",
            "-o",
            lowered,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [T.tool("fsdp-run"), lowered, "--inputs", out, "--outputs", results, "--steps", str(STEPS)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    reference = train_reference(module, loss_fn, batches, cfg, lrs)
    errors = compare_training(results, reference, t["exclude"])
    losses = errors["losses"]
    assert losses[-1] < 0.8 * losses[0], f"the loss did not go down: {losses}"
    assert errors["loss"].max() < 1e-4, f"loss errors per step: {errors['loss']}"
    worst = max(errors["params"].items(), key=lambda kv: kv[1])
    assert worst[1] < 1e-4, f"final parameters: {worst}"
    assert len(errors["params"]) == len(list(module.parameters()))
