"""Against PyTorch FSDP2 itself: `fully_shard` on the GPT blocks and the root
over gloo (2 CPU processes), the same parameters and global batch as the
exported step; FSDP2's gradients (`full_tensor()`) and fsdp-run's agree."""

import os
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
dist = pytest.importorskip("torch.distributed")

import torch_models as T  # noqa: E402

from fsdp_mlir.torch import export_step, load_results  # noqa: E402

WORLD = 2
GLOBAL_BATCH = 4
TIMEOUT_S = 300

pytestmark = [
    pytest.mark.skipif(
        not (T.tool("fsdp-opt") and T.tool("fsdp-run")), reason="fsdp-opt / fsdp-run not built"
    ),
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed not available"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fsdp2_rank(rank, world, port, state, batch, out):
    """One FSDP2 rank: fully_shard each block, then the root; backward on the
    rank's rows; rank 0 saves the gathered gradients and the mean loss."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = T.GPT(blocks=2)
    model.load_state_dict(state)
    mesh = init_device_mesh("cpu", (world,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    b = batch[0].shape[0] // world
    rows = [t[rank * b : (rank + 1) * b] for t in batch]
    loss = T.lm_loss(model, *rows)
    loss.backward()
    grads = {n: p.grad.full_tensor() for n, p in model.named_parameters()}
    mean_loss = loss.detach().clone()
    dist.all_reduce(mean_loss)
    if rank == 0:
        torch.save({"loss": mean_loss / world, "grads": grads}, out)
    # Leave together and without gloo's teardown: destroying the group while
    # a peer closes its connections can abort the process ("terminate called
    # without an active exception"). Past the barrier nothing is left to send;
    # a rank that failed above exits non-zero with its exception.
    dist.barrier()
    os._exit(0)


def test_gradients_match_fsdp2(tmp_path):
    torch.manual_seed(11)
    model = T.GPT(blocks=2)
    batch = T.gpt_batch(GLOBAL_BATCH, seed=12)
    out = str(tmp_path / "fsdp2.pt")
    # spawn, not fork: forking a process whose torch thread pools already run
    # can deadlock the children.
    ctx = torch.multiprocessing.get_context("spawn")
    port = free_port()
    procs = [
        ctx.Process(target=fsdp2_rank, args=(r, WORLD, port, model.state_dict(), batch, out))
        for r in range(WORLD)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=TIMEOUT_S)
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
    assert not hung, f"FSDP2 ranks still running after {TIMEOUT_S} s"
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    theirs = torch.load(out)

    exported = str(tmp_path / "export")
    step = export_step(model, T.lm_loss, batch, exported, mesh=str(WORLD), units=[T.Block])
    loss, grads = load_results(T.compile_and_run(exported, step["config"]["pipeline"]), model)

    errors = T.max_rel_errors(loss, grads, theirs["loss"], theirs["grads"])
    assert len(errors) == 1 + len(list(model.parameters()))
    assert max(errors.values()) <= 1e-5, errors
