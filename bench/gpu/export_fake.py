"""The PyTorch frontend's export (``python -m fsdp_mlir.torch export``)
with the step traced on fake tensors: shapes and dtypes only, no compute
and no memory for activations. GPT-2 small at 8 x 1024 tokens traced with
real tensors runs its whole training step on the CPU (tens of GB); the
graph, hence the MLIR, is the same (bench/gpu/pack_aot.py checks that on
a small GPT-2 before it exports the large one).

    python bench/gpu/export_fake.py SPEC --mesh 1 -o DIR [export options]
"""

import functools
import sys

from torch.fx.experimental import proxy_tensor


def main(argv=None) -> int:
    real = proxy_tensor.make_fx
    # trace_step imports make_fx when it runs: it gets this one.
    proxy_tensor.make_fx = functools.partial(real, tracing_mode="fake")
    from fsdp_mlir.torch.__main__ import main as export_main

    return export_main(["export", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
