"""pytest setup for the quantization cross-check.

Run:  FSDPRT_QUANT_LIB=<build>/libfsdprt_quant.so python -m pytest runtime/test/quant
(or --quant-lib=<path>). Without either, a few build directories of this
repository are searched; if none has the library, every test fails.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import quant_lib  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--quant-lib", default=None,
                     help="path to libfsdprt_quant.so (default: $FSDPRT_QUANT_LIB)")


@pytest.fixture(scope="session")
def qlib(request):
    path = quant_lib.find_library(request.config.getoption("--quant-lib"))
    if path is None or not Path(path).exists():
        pytest.fail("libfsdprt_quant.so not found: build it and set FSDPRT_QUANT_LIB "
                    f"(looked at {path or [str(c) for c in quant_lib.CANDIDATES]})")
    return quant_lib.QuantLib(path)
