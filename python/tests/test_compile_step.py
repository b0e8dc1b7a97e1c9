"""compile_step: a PyTorch GPT trained in-process (the runner library keeps
parameters and optimizer state sharded between calls) gives bit for bit
what fsdp-run --steps N gives for the same export, batches and learning
rates."""

import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch_models as T  # noqa: E402

from fsdp_mlir import runner  # noqa: E402
from fsdp_mlir.torch import compile_step  # noqa: E402
from fsdp_mlir.torch.examples import gpt_training  # noqa: E402
from fsdp_mlir.torch.train import export_training  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (T.tool("fsdp-opt") and T.tool("fsdp-run") and runner.available()),
    reason="fsdp-opt / libfsdprun not built",
)

STEPS = 10


def test_gpt_adamw_in_process_equals_fsdp_run(tmp_path):
    t = gpt_training(STEPS)
    module, loss_fn, batches, cfg, lrs = (
        t["module"],
        t["loss_fn"],
        t["batches"],
        t["optimizer"],
        t["lrs"],
    )
    out = tmp_path / "cli"
    model = export_training(module, loss_fn, batches, out, cfg, lrs, mesh="2", units=t["units"])
    results = Path(
        T.compile_and_run(str(out), model["train_pipeline"], extra=["--steps", str(STEPS)])
    )
    cli_losses = np.load(results / "loss.npy")

    step = compile_step(module, loss_fn, batches[0], mesh="2", optimizer=cfg, units=t["units"])
    losses = [step(*batch, lr=lr) for batch, lr in zip(batches, lrs)]
    assert step.steps_taken == STEPS
    got = np.array([float(v) for v in losses], np.float32)
    assert got.tobytes() == cli_losses.astype(np.float32).tobytes(), (got, cli_losses)
    params = step.parameters()
    assert set(params) == {n for n, _ in module.named_parameters()}
    for name, value in params.items():
        want = np.load(results / f"{name}.npy")
        assert value.numpy().tobytes() == want.tobytes(), name
    assert losses[-1] < losses[0]
    # One learning rate per step along a leading dimension: it must cover
    # the steps the run reads (global steps 10 and 11 here).
    step.program.set_input("lr", np.zeros(1, np.float32))
    with pytest.raises(runner.RunnerError, match="1 step slice"):
        step.program.run(steps=2)
    assert step.program.steps_taken == STEPS  # the failed run changed nothing
    step.close()


def test_a_failed_compile_names_the_command_that_reproduces_it(tmp_path):
    """fsdp-opt's error (an option no pass has) comes back with the command
    that reproduces it on the exported step, which is kept."""
    import shlex
    import subprocess

    from fsdp_mlir.torch import ExportError

    torch.manual_seed(0)
    module = T.MLP()
    batch = (torch.randn(4, 6), torch.randn(4, 3))
    with pytest.raises(ExportError) as err:
        compile_step(
            module, T.mse_loss, batch, mesh="2", workdir=str(tmp_path), verify=False, no_such=1
        )
    message, command = str(err.value).split("reproduce with:\n  ")
    assert message.startswith("fsdp-opt failed (") and "no-such" in message, message
    proc = subprocess.run(shlex.split(command), capture_output=True, text=True)
    assert proc.returncode != 0 and "no-such" in proc.stderr, proc.stderr


class _Shifted(torch.nn.Module):
    """A column-parallel projection whose output is flipped along its split
    dimension: a read at positions the tensor-parallel pass cannot
    partition."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 8)

    def forward(self, x):
        return torch.flip(self.proj(x), [-1])


def test_a_rejected_op_is_named_by_its_module_path(tmp_path):
    """The exported step's ops carry their module path, aten op and source
    line as locations: fsdp-opt's diagnostic (and compile_step's error) names
    the submodule the rejected op came from."""
    from fsdp_mlir.torch import ExportError

    module = torch.nn.Sequential()
    module.add_module("block", torch.nn.ModuleDict({"mix": _Shifted()}))
    module.forward = lambda x: module.block["mix"](x)

    def loss_fn(m, x):
        return m(x).square().mean()

    line = _Shifted.forward.__code__.co_firstlineno + 1
    with pytest.raises(ExportError) as err:
        compile_step(
            module,
            loss_fn,
            (torch.randn(4, 4),),
            mesh="dp=1,tp=2",
            tp_plan={"block.mix.proj": "colwise"},
            workdir=str(tmp_path),
            verify=False,
        )
    message = str(err.value)
    assert f'loc("block.mix"("aten.flip at {__file__}:{line}")): its body reads' in message, message
    assert "reproduce with:" in message
    # The gradient's ops carry the module path of the forward they differentiate.
    text = (tmp_path / "step.mlir").read_text()
    aliases = dict(re.findall(r"^(#loc\d*) = loc\((.*)\)$", text, re.M))
    backward = [
        aliases.get(a, a) for a in re.findall(r'"block\.mix\.proj \(backward\)"\((#loc\d+)\)', text)
    ]
    assert any(b.startswith('"aten.mm') for b in backward), backward
