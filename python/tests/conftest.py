"""Shared helpers for the fsdp_mlir tests."""

import os

import pytest

from fsdp_mlir import model as M
from fsdp_mlir.dev import gen
from fsdp_mlir.dev.upstream_exec import missing_tools


def build(argv):
    """Model description from generator CLI arguments."""
    return gen.model_from_args(gen.build_parser().parse_args(argv))


def generate(tmp_path, argv, name="model"):
    """Run the generator CLI; returns (mlir text, data dir, model dict)."""
    mlir = os.path.join(tmp_path, f"{name}.mlir")
    data = os.path.join(tmp_path, f"{name}-data")
    assert gen.main(list(argv) + ["-o", mlir, "--data", data]) == 0
    with open(mlir) as f:
        text = f.read()
    return text, data, M.load_model(data)


requires_upstream_tools = pytest.mark.skipif(
    bool(missing_tools()), reason="upstream MLIR tools missing: " + ", ".join(missing_tools())
)
