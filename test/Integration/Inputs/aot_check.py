"""fsdp-run, checked against its ahead-of-time twin.

With `lit --param fsdp_aot=1` (the ctest `aot-integration`) every `fsdp-run`
of a RUN line is this script: it compiles the module with fsdp-compile
(cached by content), runs fsdp-run on the module (the JIT) and on the step
library, requires the same exit status, the same output lines (timing lines
aside) and bit-identical .npy results and checkpoints, and then reports what
the JIT run printed, so the test's own checks apply as before. The step
library runs with no JIT available ($FSDP_JIT_LIBRARY names no file), with
the build's fsdp-run or the one `--aot-runner=PATH` names (a runner built
from runtime/ alone).

Under mpirun each rank runs only the step library (a second MPI run inside a
rank's process is not possible); the test's checks then hold the AOT
results to the reference. An input that fsdp-compile rejects must be one
that fsdp-run rejects too.
"""

from __future__ import annotations

import difflib
import filecmp
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

# fsdp-run's flags that take a value as the next argument.
VALUE_FLAGS = {
    "--entry", "--inputs", "--outputs", "--backend", "--world", "--timeout",
    "--steps", "--warmup", "--save", "--save-every", "--resume",
    "--jit-cache-dir",
}  # fmt: skip
# Lines that differ between two runs of the same step: timings, and the
# process's resident set (which holds the JIT's compiler or not).
TIMING = re.compile(
    r"^(parse [0-9.]+ s, (jit|load) |exposed communication |\s*resident set of the process"
    r"|\s*page faults per step)"
)


def module_index(args: list[str]) -> int | None:
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a in VALUE_FLAGS:
            skip = True
            continue
        if not a.startswith("-") and os.path.isfile(a):
            return i
    return None


def flag_value(args: list[str], flag: str) -> tuple[int, str] | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return i + 1, args[i + 1]
        if a.startswith(flag + "="):
            return i, a.split("=", 1)[1]
    return None


def with_value(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    found = flag_value(out, flag)
    if found:
        i, _ = found
        out[i] = f"{flag}={value}" if out[i].startswith(flag + "=") else value
    return out


def compile_library(tools: str, module: str) -> tuple[str | None, str]:
    digest = hashlib.sha256(Path(module).read_bytes()).hexdigest()[:32]
    cache = Path(os.environ.get("FSDP_JIT_CACHE_DIR", "/tmp")) / "aot"
    cache.mkdir(parents=True, exist_ok=True)
    lib = cache / f"{digest}.so"
    if lib.exists():
        return str(lib), ""
    tmp = cache / f"{digest}.{os.getpid()}.so"
    p = subprocess.run(
        [f"{tools}/fsdp-compile", module, "-o", str(tmp)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        return None, p.stderr
    os.replace(tmp, lib)
    return str(lib), ""


def same_tree(a: str, b: str) -> list[str]:
    """Files of `a` that `b` lacks or holds with other bytes."""
    diffs = []
    for root, _, files in os.walk(a):
        for f in files:
            pa = os.path.join(root, f)
            pb = os.path.join(b, os.path.relpath(pa, a))
            if not os.path.exists(pb) or not filecmp.cmp(pa, pb, shallow=False):
                diffs.append(os.path.relpath(pa, a))
    return diffs


# --json keys that measure the run or say where the code came from.
VARYING_KEYS = (
    "parse_s",
    "jit_s",
    "jit_cached",
    "jit_phases",
    "jit_phases_s",
    "precompiled",
    "rss_bytes",
    "step_s",
    "step_median_s",
    "step_min_s",
    "step_page_faults",
    "arena_reserve_s",
    "step_exposed_comm_s",
    "exposed_comm_median_s",
    "blas",
    "blas_core",
    "blas_detected_core",
)


def comparable(line: str) -> str:
    if not line.startswith("{"):
        return line
    try:
        report = json.loads(line)
    except json.JSONDecodeError:
        return line
    for key in VARYING_KEYS:
        report.pop(key, None)
    return json.dumps(report, sort_keys=True)


def lines(text: str) -> list[str]:
    return [comparable(line) for line in text.splitlines() if not TIMING.match(line)]


def main() -> int:
    tools = sys.argv[1].split("=", 1)[1]
    args = sys.argv[2:]
    run = f"{tools}/fsdp-run"
    aot_run = run
    if args and args[0].startswith("--aot-runner="):
        aot_run = args.pop(0).split("=", 1)[1]
    # The step library's runs must not need the JIT.
    aot_env = dict(os.environ, FSDP_JIT_LIBRARY="/nonexistent/libfsdpjit.so")
    i = module_index(args)
    under_mpi = "OMPI_COMM_WORLD_RANK" in os.environ or "PMI_RANK" in os.environ
    lib, why = compile_library(tools, args[i]) if i is not None else (None, "")
    if under_mpi:
        if lib is None:
            sys.stderr.write(why)
            return 1
        return subprocess.run(
            [aot_run] + args[:i] + [lib] + args[i + 1 :], env=aot_env
        ).returncode
    jit = subprocess.run([run] + args, capture_output=True, text=True)
    sys.stdout.write(jit.stdout)
    sys.stderr.write(jit.stderr)
    if i is None:
        return jit.returncode
    if lib is None:
        if jit.returncode == 0:
            sys.stderr.write(
                f"AOT MISMATCH: fsdp-compile rejects what the JIT runs:\n{why}"
            )
            return 1
        return jit.returncode
    aot_args = args[:i] + [lib] + args[i + 1 :]
    renamed = []
    for flag in ("--outputs", "--save"):
        found = flag_value(aot_args, flag)
        if found:
            aot_args = with_value(aot_args, flag, found[1] + ".aot")
            renamed.append((found[1], found[1] + ".aot"))
    for _, d in renamed:
        subprocess.run(["rm", "-rf", d])
    aot = subprocess.run([aot_run] + aot_args, capture_output=True, text=True, env=aot_env)
    problems = []
    if aot.returncode != jit.returncode:
        problems.append(
            f"exit status {aot.returncode}, the JIT's {jit.returncode}: {aot.stderr.strip()}"
        )
    # Messages name the renamed directories.
    aot_out = aot.stdout
    for a, b in renamed:
        aot_out = aot_out.replace(b, a)
    if lines(aot_out) != lines(jit.stdout):
        diff = difflib.unified_diff(
            lines(jit.stdout), lines(aot_out), "jit", "aot", lineterm=""
        )
        problems.append("different output:\n" + "\n".join(diff))
    if jit.returncode == 0:
        for a, b in renamed:
            if os.path.isdir(a):
                problems += [f"{b}/{f} differs from the JIT's" for f in same_tree(a, b)]
    if problems:
        sys.stderr.write("AOT MISMATCH (" + lib + "): " + "; ".join(problems) + "\n")
        return 1
    return jit.returncode


if __name__ == "__main__":
    sys.exit(main())
