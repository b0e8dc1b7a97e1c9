"""What the benchmark drivers (bench/*/bench.py) share: stopping with a
message and running the project's tools and Python modules."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Driver:
    """fail() and run() of one benchmark, its messages prefixed by `name`."""

    def __init__(self, name):
        self.name = name

    def fail(self, message):
        sys.exit(f"{self.name}: {message}")

    def run(self, cmd, **kw):
        """Runs cmd; on failure stops with the command and its output."""
        cmd = list(map(str, cmd))
        proc = subprocess.run(cmd, check=False, text=True, capture_output=True, **kw)
        if proc.returncode != 0:
            self.fail(
                f"command failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
            )
        return proc


def python_env(**extra):
    """The environment for `python -m fsdp_mlir...`: the project's python/
    first on PYTHONPATH."""
    path = os.pathsep.join(
        p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p
    )
    return dict(os.environ, PYTHONPATH=path, **extra)
