"""Mutation fuzzer for fsdp-opt and fsdp-run.

Mutates the project's own test inputs (every `.mlir` file under test/ and
examples/, split at `// -----`) and runs the tools on them:

- fsdp-opt in four modes: `parse` (parse and verify), `pipeline`
  (`--fsdp-pipeline`, sometimes with hostile option values), `report`
  (`--fsdp-comm-report` or `--fsdp-layout-report`) and `lower`
  (`--fsdp-pipeline=lower=true`);
- fsdp-run on a small generated step: mutated `.npy` inputs (headers,
  shapes, dtypes, lengths), equivalent re-encodings of valid inputs (which
  must give bit-identical results), mutated runner attributes of the lowered
  module (`fsdp.signatures`, names, mesh) and bad runner options.

Every run must end with exit status 0, or 1 with an `error:` message (or
LLVM's `for the --NAME option:` message for a bad option value): never a
signal, an abort, `LLVM ERROR`, an uncaught exception or a timeout. Every
successful fsdp-opt output must parse and verify again (and a `lower` output
hold no `unrealized_conversion_cast`); a successful fsdp-run writes only
inside `--outputs`, and an input re-encoded the way numpy may write it gives
bit-identical results. Each distinct failure (tool, mode, kind and
the first project frame of the stack or the normalized message) is reported
once, with its command and a reproducer written to the findings folder.

The cases depend only on the seed and the counts, not on the job count.

  python -m fsdp_mlir.dev.fuzz --bin build/bin --count 300 --runner-count 40
  python -m fsdp_mlir.dev.fuzz --bin build/bin --count 3000 --modes all --runner-count 300 \\
      --findings fuzz-findings         # the long run, about 15 min on 2 cores

Exit status: 0 when nothing was found, 1 otherwise.
"""

import argparse
import concurrent.futures
import hashlib
import os
import random
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
MODES = ("parse", "pipeline", "report", "lower")

INTERESTING_INTS = [
    0,
    1,
    -1,
    2,
    3,
    5,
    7,
    16,
    63,
    64,
    65,
    127,
    255,
    1023,
    2**31 - 1,
    2**31,
    2**32,
    2**40,
    2**62,
    2**63 - 1,
    -(2**63),
    10**19,
    123456789012345678901,
]
ELEMENT_TYPES = [
    "f32",
    "f16",
    "bf16",
    "f64",
    "i1",
    "i8",
    "i32",
    "i64",
    "index",
    "complex<f32>",
    "f8E4M3FN",
    "f8E5M2",
    "vector<2xf32>",
    "!llvm.ptr",
    "none",
]
PLACEMENTS = [
    "replicate",
    "shard<0>",
    "shard<1>",
    "shard<2>",
    "shard<-1>",
    "shard<0, balanced>",
    "strided_shard<0, 2>",
    "strided_shard<1, 3>",
    "strided_shard<0, 0>",
    "strided_shard<0, 4611686018427387904>",
    "partial<sum>",
    "partial<avg>",
    "partial<max>",
]
NAMES = ['"../ESCAPED"', '""', '".hidden"', '"a/b"', '"x"', '"w"', '"loss"', "7"]
PIPELINE_OPTIONS = {
    "reduce-op": ["avg", "sum", "max", "bogus"],
    "grad-scale": ["0.5", "0", "-1", "nan", "inf", "1e309"],
    "param-dtype": ["bf16", "f16", "f32", "f8E4M3FN", "i32", "index", "bogus"],
    "reduce-dtype": ["f32", "bf16", "f8E5M2", "i8", "complex<f32>"],
    "reshard-after-forward": ["true", "false"],
    "uneven-policy": ["ceil", "balanced", "bogus"],
    "accumulation-steps": ["0", "1", "2", "-1", "1000000", "9223372036854775807"],
    "bucket": ["unit", "greedy", "none", "bogus"],
    "bucket-bytes": ["0", "1", "64", "-1", "9223372036854775807"],
    "bucket-alignment": ["0", "1", "3", "4611686018427387904", "9223372036854775807"],
    "prefetch": ["0", "1", "2", "-1", "1000000"],
    "memory-limit": ["0", "1", "100", "-1"],
    "quantize": ["", "fp8_e4m3_tensor", "mxfp8_rowwise", "nvfp4", "fp8_block_1x128", "bogus"],
    "quantize-min-elements": ["0", "1", "-1", "9223372036854775807"],
    "all-reduce-loss": ["true", "false"],
    "schedule": ["true", "false"],
}
CRASH_MARKERS = (
    "LLVM ERROR",
    "PLEASE submit a bug report",
    "Stack dump:",
    "terminate called",
    "Assertion",
    "AddressSanitizer",
    "runtime error:",
)


# --- mutations of MLIR text -------------------------------------------------
def _sub_random(rng, text, pattern, choices):
    matches = list(re.finditer(pattern, text))
    if not matches:
        return None
    m = rng.choice(matches)
    keep = m.group("pre") if "pre" in m.re.groupindex else ""
    return text[: m.start()] + keep + str(rng.choice(choices)) + text[m.end() :]


def mutate_int(rng, text):
    return _sub_random(rng, text, r"(?<![\w%#@.])\d+(?![\w.])", INTERESTING_INTS)


def mutate_type(rng, text):
    return _sub_random(
        rng, text, r"(?<=[x<\s(,:])(f32|f16|bf16|f64|i1|i8|i32|i64|index)(?=[>,)\s])", ELEMENT_TYPES
    )


def mutate_placement(rng, text):
    return _sub_random(
        rng, text, r"\b(replicate|shard<[^<>]*>|strided_shard<[^<>]*>|partial<\w+>)", PLACEMENTS
    )


def mutate_mesh(rng, text):
    # An axis size, or a whole new axis list.
    if rng.random() < 0.5:
        return _sub_random(rng, text, r"(?<=\w = )\d+(?=[,\]])", INTERESTING_INTS)
    axes = rng.choice(
        [
            "[]",
            "[shard = 0]",
            "[shard = 4, shard = 2]",
            "[shard = 1099511627776]",
            "[" + ", ".join(f"a{i} = 1" for i in range(70)) + "]",
            "[r = 2, s = 2, t = 2, u = 2, v = 2, w = 2, x = 2, y = 2, z = 2]",
        ]
    )
    return _sub_random(rng, text, r"(?P<pre>fsdp\.mesh @\w+ )\[[^\]]*\]", [axes])


def mutate_name(rng, text):
    return _sub_random(rng, text, r'(?<=fsdp\.name = )"[^"]*"', NAMES)


def mutate_lines(rng, text):
    lines = text.split("\n")
    if len(lines) < 2:
        return None
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    op = rng.choice(["delete", "duplicate", "swap", "move"])
    if op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(j, lines[i])
    elif op == "swap":
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(j, lines.pop(i))
    return "\n".join(lines)


def mutate_bytes(rng, text):
    if not text:
        return None
    i = rng.randrange(len(text))
    op = rng.choice(["delete", "insert", "replace"])
    if op == "delete":
        return text[:i] + text[i + rng.randint(1, 8) :]
    ch = rng.choice(list("{}()<>[],:=%@\"'#x0-") + ["\x00", "\xff", " ", "\n"])
    if op == "insert":
        return text[:i] + ch + text[i:]
    return text[:i] + ch + text[i + 1 :]


def mutate_splice(rng, text, corpus):
    donor = rng.choice(corpus).text.split("\n")
    lines = text.split("\n")
    at = rng.randrange(len(lines) + 1)
    start = rng.randrange(len(donor))
    return "\n".join(lines[:at] + donor[start : start + rng.randint(1, 4)] + lines[at:])


MLIR_MUTATORS = [
    (mutate_int, 5),
    (mutate_type, 3),
    (mutate_placement, 3),
    (mutate_mesh, 2),
    (mutate_name, 1),
    (mutate_lines, 2),
    (mutate_bytes, 2),
]


def mutate_mlir(rng, text, corpus, steps):
    funcs = [f for f, w in MLIR_MUTATORS for _ in range(w)]
    for _ in range(steps):
        if rng.random() < 0.08:
            new = mutate_splice(rng, text, corpus)
        else:
            new = rng.choice(funcs)(rng, text)
        if new is not None:
            text = new
    return text


# --- mutations of .npy files ------------------------------------------------
def npy_bytes(header, data, version=(1, 0)):
    magic = b"\x93NUMPY" + bytes(version)
    size_len = 2 if version[0] == 1 else 4
    enc = "latin1" if version[0] < 3 else "utf8"
    h = header.encode(enc)
    pad = 64 - (len(magic) + size_len + len(h) + 1) % 64
    h = h + b" " * (pad % 64) + b"\n"
    return magic + len(h).to_bytes(size_len, "little") + h + data


def equivalent_npy(rng, arr):
    """A different encoding of the same array that numpy reads as `arr`."""
    shape = "(" + "".join(f"{d}, " for d in arr.shape).rstrip(" ")
    if len(arr.shape) > 1:
        shape = shape.rstrip(",")
    shape += ")"
    descr, data = "'<f4'", arr.astype("<f4").tobytes()
    kind = rng.choice(["keyorder", "nocomma", "v2", "v3", "fortran", "bigendian", "spaces"])
    fortran = "False"
    if kind == "fortran" and arr.ndim >= 2:
        fortran, data = "True", np.asfortranarray(arr.astype("<f4")).tobytes(order="F")
    if kind == "bigendian":
        descr, data = "'>f4'", arr.astype(">f4").tobytes()
    keys = [f"'descr': {descr}", f"'fortran_order': {fortran}", f"'shape': {shape}"]
    if kind in ("keyorder", "fortran", "nocomma"):
        rng.shuffle(keys)
    header = "{" + ", ".join(keys) + ("" if kind in ("nocomma", "fortran") else ", ") + "}"
    if kind == "spaces":
        header = "{ " + ",  ".join(keys) + " , }"
    version = {"v2": (2, 0), "v3": (3, 0)}.get(kind, (1, 0))
    return kind, npy_bytes(header, data, version)


def hostile_npy(rng, raw):
    """A broken or hostile variant of the .npy bytes `raw`."""
    hlen = int.from_bytes(raw[8:10], "little")
    header = raw[10 : 10 + hlen].decode("latin1")
    data = raw[10 + hlen :]
    kind = rng.choice(
        [
            "shape",
            "descr",
            "fortran",
            "truncate",
            "append",
            "headerlen",
            "version",
            "magic",
            "flip",
            "garbage-header",
        ]
    )
    if kind == "shape":
        value = rng.choice(
            ["(-1,)", "(x,)", "(99999999999999999999,)", "(1099511627776,)", "()", "(0,)"]
            + ["(4294967296, 4294967296)", "(2, -3)", "(1, 2, 3, 4, 5, 6, 7, 8, 9)", "(3,4"]
        )
        header = re.sub(r"'shape': \([^)]*\)", "'shape': " + value, header)
        return kind, npy_bytes(header.strip(), data)
    if kind == "descr":
        value = rng.choice(["'<f-4'", "'<f8'", "'<i4'", "'|b1'", "'<c8'", "'<U3'", "'O'"])
        value = rng.choice([value, "'<f99999999999'", "'<f0'", "'f4'", "'<<f4'", "3"])
        header = re.sub(r"'descr': '[^']*'", "'descr': " + value, header)
        return kind, npy_bytes(header.strip(), data)
    if kind == "fortran":
        header = header.replace("False", rng.choice(["True", "1", "None", "'yes'"]))
        return kind, npy_bytes(header.strip(), data)
    if kind == "truncate":
        return kind, raw[: rng.randrange(len(raw))]
    if kind == "append":
        return kind, raw + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if kind == "headerlen":
        value = rng.choice([0, 1, 65535, hlen + 1, max(0, hlen - 1)])
        if rng.random() < 0.4:
            return kind, b"\x93NUMPY\x02\x00" + (2**32 - 1).to_bytes(4, "little") + raw[10:]
        return kind, raw[:8] + value.to_bytes(2, "little") + raw[10:]
    if kind == "version":
        return kind, raw[:6] + bytes([rng.choice([0, 4, 255]), rng.randrange(256)]) + raw[8:]
    if kind == "magic":
        return kind, b"\x93NUMPX" + raw[6:]
    if kind == "flip":
        buf = bytearray(raw)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return kind, bytes(buf)
    junk = "".join(rng.choice("{}()[]':,xyz 0123456789-") for _ in range(rng.randint(0, 80)))
    return kind, npy_bytes(junk, data)


# --- running and judging ----------------------------------------------------
@dataclass
class Seed:
    name: str
    text: str
    unregistered: bool


@dataclass
class Case:
    id: int
    tool: str
    mode: str
    detail: str
    files: dict = field(default_factory=dict)  # relative path -> bytes
    argv: list = field(default_factory=list)  # {dir} is the case folder
    reverify: bool = False
    expect: str = ""  # runner: folder of outputs that a success must match
    unregistered: bool = False


@dataclass
class Finding:
    signature: str
    case: Case
    message: str
    command: str
    count: int = 1
    reproducer: str = ""


def limit_resources():
    # 4 GiB of address space: an allocation of a size read from the input
    # fails (and must be reported) instead of taking the machine.
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # 1 GiB per output file.
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))


# Frames inside the project's binaries that are library code (templates,
# callbacks, startup): never the place to report.
LIBRARY_FRAMES = (
    "std::",
    "__gnu",
    "main",
    "_start",
    "mlir::detail::",
    "llvm::function_ref",
    "llvm::detail::",
)


def qualified(name):
    """The function's qualified name without its return type."""
    depth, last = 0, 0
    for i, ch in enumerate(name):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == " " and depth == 0:
            last = i + 1
    return name[last:]


def first_frame(stderr):
    """Where it crashed: the first stack frame inside the project (fsdp,
    fsdprt), else the uncaught exception's type, else the LLVM ERROR message,
    else the first named frame that is not the signal handler's."""
    frames, ours = [], []
    for line in stderr.splitlines():
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ (.*)", line)
        if m and not re.match(r"\((/|\.|$)", m.group(1)):
            name = re.sub(r"\[abi:\w+\]", "", m.group(1)).replace("(anonymous namespace)", "{anon}")
            name = re.split(r"\(| \S+:\d", name, maxsplit=1)[0].strip()
            name = name.replace("{anon}", "(anonymous namespace)")
            frames.append(name)
            # The project's code: named fsdp, or in its binaries and sources.
            ours_at = r"fsdp-opt\+|fsdp-run\+|libfsdp|libMLIRFSDP|\s[A-Za-z]\w*\.(cpp|h):\d"
            if (re.search(r"fsdp|FSDP", name) or re.search(ours_at, m.group(1))) and not qualified(
                name
            ).startswith(LIBRARY_FRAMES):
                ours.append(name)
    if ours:
        return ours[0]
    m = re.search(r"terminate called after throwing an instance of '([^']+)'", stderr)
    if m:
        return f"uncaught {m.group(1)}"
    m = re.search(r"LLVM ERROR: (.*)", stderr)
    if m:
        return "LLVM ERROR: " + normalize(m.group(1))
    for name in frames:
        if not name.startswith(("llvm::sys::", "__restore_rt", "SignalHandler", "__pthread")):
            return name
    return None


def normalize(message):
    message = re.sub(r"/\S+/", "", message)
    message = re.sub(r"-?\d+", "N", message)
    return message.strip()[:160]


def judge(case, proc, folder, timed_out, runner_baseline):
    """(kind, detail) of a failure, or None when the run is acceptable."""
    if timed_out:
        return "timeout", ""
    out = (proc.stdout or "") + (proc.stderr or "")
    rc = proc.returncode
    frame = first_frame(proc.stderr or "")
    if rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.valid_signals() else str(-rc)
        return f"signal {sig}", frame or ""
    marker = next((m for m in CRASH_MARKERS if m in out), None)
    if marker or rc not in (0, 1):
        line = next((x for x in out.splitlines() if marker and marker in x), "")
        if not line:
            line = next((x for x in out.splitlines() if x.strip()), "")
        return f"exit {rc}", frame or normalize(line)
    # LLVM's command-line library reports a bad option value (also inside a
    # pass pipeline's options) as `TOOL: for the --NAME option: ...`.
    if rc == 1 and "error:" not in out and not re.search(r"for the -{1,2}[\w-]+ option: ", out):
        return "exit 1 without error:", normalize(out.splitlines()[0] if out else "")
    if rc == 0 and case.tool == "fsdp-run":
        return runner_success_problem(case, folder, runner_baseline)
    return None


def runner_success_problem(case, folder, baseline):
    outside = [
        rel
        for rel in (p.relative_to(folder).as_posix() for p in folder.rglob("*"))
        if rel not in case.files and not rel.startswith("out/") and (folder / rel).is_file()
    ]
    if outside:
        return "wrote outside --outputs", ", ".join(sorted(outside))[:120]
    if case.expect:
        for ref in sorted(Path(baseline).glob("*.npy")):
            got = folder / "out" / ref.name
            if not got.exists():
                return "equivalent input, missing result", ref.name
            a, b = np.load(ref), np.load(got)
            if a.shape != b.shape or not np.array_equal(a, b, equal_nan=True):
                return "equivalent input, different result (exit 0)", ref.name
    return None


def head(path, limit=1 << 16):
    with open(path, "rb") as f:
        return f.read(limit).decode(errors="replace")


def execute(argv, folder, timeout, prefix=""):
    """Runs argv in folder with its output in files (a tool that prints
    without end cannot fill the fuzzer's memory); returns (the completed
    process with the first 64 KiB of each stream, whether it timed out)."""
    out, err = folder / f"{prefix}stdout.txt", folder / f"{prefix}stderr.txt"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        try:
            rc = subprocess.run(
                argv,
                stdout=fo,
                stderr=fe,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                preexec_fn=limit_resources,
                cwd=folder,
                check=False,
            ).returncode
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = -9, True
    proc = subprocess.CompletedProcess(argv, rc, head(out), head(err))
    out.unlink()
    err.unlink()
    return proc, timed_out


def run_case(case, work, bins, timeout):
    try:
        return run_case_unchecked(case, work, bins, timeout)
    except Exception as err:  # a bug of the fuzzer itself: report, go on
        return Finding(f"fuzzer error: {type(err).__name__}: {err}"[:200], case, "", "")


def run_case_unchecked(case, work, bins, timeout):
    folder = Path(work) / f"case{case.id:05d}"
    folder.mkdir(parents=True)
    for rel, data in case.files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, Path):
            os.symlink(data, path)
        else:
            path.write_bytes(data)
    argv = [bins[case.tool]] + [a.format(dir=folder) for a in case.argv]
    proc, timed_out = execute(argv, folder, timeout)
    if timed_out:  # a loaded machine is no hang: once more, with 3x the time
        proc, timed_out = execute(argv, folder, 3 * timeout)
    verdict = judge(case, proc, folder, timed_out, case.expect)
    if verdict is None and case.mode == "lower" and proc.returncode == 0:
        # A lowered module is LLVM dialect plus runtime calls: nothing left
        # for the JIT to choke on.
        with open(folder / "out.mlir", errors="replace") as f:
            if "unrealized_conversion_cast" in f.read():
                verdict = ("lowered output keeps unrealized_conversion_cast", "")
    if verdict is None and case.reverify and proc.returncode == 0:
        again = [bins["fsdp-opt"], str(folder / "out.mlir"), "-o", os.devnull]
        if case.unregistered:
            again.append("--allow-unregistered-dialect")
        proc2, late = execute(again, folder, timeout, prefix="reverify-")
        if late:
            proc2, late = execute(again, folder, 3 * timeout, prefix="reverify-")
        if late:
            verdict = ("output re-verify timeout", "")
        elif proc2.returncode != 0:
            first = next((x for x in proc2.stderr.splitlines() if "error" in x), "")
            verdict = ("output does not re-verify", normalize(first.split("error:")[-1]))
            proc, argv = proc2, again
    result = None
    if verdict:
        kind, detail = verdict
        signature = f"{case.tool} {case.mode}: {kind}" + (f" @ {detail}" if detail else "")
        message = "\n".join(((proc.stderr or "") + (proc.stdout or "")).splitlines()[:8])
        # Paths relative to the case folder, which command.sh changes to.
        command = shlex.join(a.replace(f"{folder}/", "").replace(str(folder), ".") for a in argv)
        result = Finding(signature, case, message, command)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return result


# --- case generation --------------------------------------------------------
def load_corpus(roots):
    corpus = []
    for root in roots:
        for path in sorted(Path(root).rglob("*.mlir")):
            if "Inputs" in path.parts and "Docs" in path.parts:
                continue
            text = path.read_text(errors="replace")
            unregistered = "allow-unregistered-dialect" in text
            body = "\n".join(x for x in text.split("\n") if not x.lstrip().startswith("// RUN"))
            for i, chunk in enumerate(re.split(r"(?m)^// -----\s*$", body)):
                if chunk.strip():
                    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    corpus.append(Seed(f"{rel}#{i}", chunk, unregistered))
    return corpus


def pipeline_flag(rng, extra=""):
    opts = [extra] if extra else []
    if rng.random() < 0.35:
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(sorted(PIPELINE_OPTIONS))
            opts.append(f"{key}={rng.choice(PIPELINE_OPTIONS[key])}")
    return "--fsdp-pipeline" + (f"={' '.join(opts)}" if opts else "")


def opt_cases(rng, corpus, count, modes, first_id):
    cases = []
    for n in range(count):
        seed = rng.choice(corpus)
        text = mutate_mlir(rng, seed.text, corpus, rng.randint(1, 3))
        for mode in modes:
            argv = ["{dir}/in.mlir", "-o", "{dir}/out.mlir"]
            if mode == "pipeline":
                argv.append(pipeline_flag(rng))
            elif mode == "lower":
                argv.append(pipeline_flag(rng, "lower=true"))
            elif mode == "report":
                argv.append(rng.choice(["--fsdp-comm-report", "--fsdp-layout-report"]))
            if seed.unregistered:
                argv.append("--allow-unregistered-dialect")
            cases.append(
                Case(
                    first_id + len(cases),
                    "fsdp-opt",
                    mode,
                    f"mutant {n} of {seed.name}",
                    {"in.mlir": text.encode("utf-8", "replace")},
                    argv,
                    reverify=True,
                    unregistered=seed.unregistered,
                )
            )
    return cases


def prepare_runner(bins, python, work):
    """A small lowered step, its inputs and its results (the baseline)."""
    base = Path(work) / "runner-base"
    base.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    subprocess.run(
        [python, "-m", "fsdp_mlir.dev.gen", "mlp", "--widths", "8,6,4", "--mesh", "2x2"]
        + ["--batch", "2", "-o", str(base / "step.mlir"), "--data", str(base / "data")],
        check=True,
        env=env,
        capture_output=True,
    )
    subprocess.run(
        [
            bins["fsdp-opt"],
            str(base / "step.mlir"),
            "--fsdp-pipeline=lower=true all-reduce-loss=true",
        ]
        + ["-o", str(base / "lowered.mlir")],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [bins["fsdp-run"], str(base / "lowered.mlir"), "--inputs", str(base / "data")]
        + ["--outputs", str(base / "out")],
        check=True,
        capture_output=True,
    )
    return base


RUNNER_OPTIONS = [
    ["--world", "0"],
    ["--world", "-1"],
    ["--world", "3"],
    ["--world", "100000"],
    ["--entry", "nope"],
    ["--entry", ""],
    ["--timeout", "0"],
    ["--timeout", "-1"],
    ["--timeout", "nan"],
    ["--timeout", "1e300"],
    ["--backend", "bogus"],
    ["--inputs", "{dir}/missing"],
    ["--outputs", "{dir}/lowered.mlir"],
]


def runner_cases(rng, base, count, first_id):
    lowered = (base / "lowered.mlir").read_text()
    header, _, rest = lowered.partition("\n")
    npys = sorted((base / "data").glob("*.npy"))
    data = {f"data/{p.name}": p.read_bytes() for p in npys}
    data.update(
        {f"data/{p.name}": p.read_bytes() for p in (base / "data").iterdir() if p.suffix != ".npy"}
    )
    cases = []
    for _ in range(count):
        files = dict(data)
        argv = ["{dir}/lowered.mlir", "--inputs", "{dir}/data", "--outputs", "{dir}/out"]
        argv += ["--timeout", "10"]
        expect = ""
        choice = rng.random()
        target = rng.choice(npys).name
        if choice < 0.35:
            kind, files[f"data/{target}"] = hostile_npy(rng, data[f"data/{target}"])
            mode, detail = "npy", f"{kind} {target}"
        elif choice < 0.55:
            arr = np.load(base / "data" / target)
            kind, files[f"data/{target}"] = equivalent_npy(rng, arr)
            mode, detail, expect = "npy-equivalent", f"{kind} {target}", str(base / "out")
        elif choice < 0.9:
            text = header
            for _ in range(rng.randint(1, 3)):
                new = rng.choice([mutate_int, mutate_type, mutate_placement, mutate_name])(
                    rng, text
                )
                if rng.random() < 0.3:
                    new = _sub_random(
                        rng,
                        text,
                        r'<"[^"]*" : tensor<[^<>]*>',
                        [
                            '<"x" : tensor<*xf32>',
                            "<3 : tensor<2xf32>",
                            '<"" : tensor<2xf32>',
                            '<"w" : tensor<?x4xf32>',
                        ],
                    )
                text = new or text
            mesh = rest
            if rng.random() < 0.3:
                mesh = mutate_mesh(rng, rest) or rest
            files["lowered.mlir"] = (text + "\n" + mesh).encode()
            mode, detail = "signatures", "mutated fsdp.signatures / mesh"
        else:
            argv += rng.choice(RUNNER_OPTIONS)
            mode, detail = "options", " ".join(argv[8:])
        files.setdefault("lowered.mlir", lowered.encode())
        cases.append(
            Case(first_id + len(cases), "fsdp-run", mode, detail, files, argv, expect=expect)
        )
    return cases


# --- driver -----------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--bin", default=str(ROOT / "build/bin"), help="folder of fsdp-opt and fsdp-run"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--count", type=int, default=100, help="mutated MLIR inputs (each run in every mode)"
    )
    ap.add_argument(
        "--modes", default="all", help=f"comma-separated fsdp-opt modes: {', '.join(MODES)} or all"
    )
    ap.add_argument("--runner-count", type=int, default=20, help="fsdp-run cases (0: none)")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument(
        "--timeout", type=float, default=10, help="seconds per run (retried once with 3x)"
    )
    ap.add_argument(
        "--findings",
        default=None,
        help="folder for one reproducer per finding (default: a temporary one)",
    )
    ap.add_argument(
        "--corpus", action="append", help="folders of seed .mlir files (default: test, examples)"
    )
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument(
        "--known",
        default=None,
        help="file of known, not yet fixed failures (`LABEL REGEX` per line): reported "
        "as KNOWN, not counted in the exit status",
    )
    ap.add_argument("--progress", type=int, default=0, help="print progress every N runs")
    args = ap.parse_args(argv)
    known = load_known(args.known) if args.known else []
    if args.findings:
        Path(args.findings).mkdir(parents=True, exist_ok=True)
    modes = MODES if args.modes == "all" else tuple(args.modes.split(","))
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode {bad[0]} (modes: {', '.join(MODES)})")
    bins = {t: str(Path(args.bin) / t) for t in ("fsdp-opt", "fsdp-run")}
    for tool, path in bins.items():
        if not os.access(path, os.X_OK) and (tool == "fsdp-opt" or args.runner_count):
            ap.error(f"no {tool} at {path}")
    corpus = load_corpus(args.corpus or [ROOT / "test", ROOT / "examples"])
    if not corpus:
        ap.error("no seed inputs found")

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="fsdp-fuzz-"))
    start = time.time()
    try:
        cases = opt_cases(rng, corpus, args.count, modes, 0)
        if args.runner_count:
            base = prepare_runner(bins, args.python, work)
            cases += runner_cases(random.Random(args.seed + 1), base, args.runner_count, len(cases))
        print(
            f"fuzz: seed {args.seed}, {len(corpus)} seed inputs, {args.count} mutants x "
            f"{len(modes)} modes + {args.runner_count} fsdp-run cases = {len(cases)} runs",
            flush=True,
        )
        findings = {}
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            runs = pool.map(lambda c: run_case(c, work, bins, args.timeout), cases)
            for done, found in enumerate(runs, 1):
                if args.progress and done % args.progress == 0:
                    print(
                        f"fuzz: {done}/{len(cases)} runs, {len(findings)} signature(s), "
                        f"{time.time() - start:.0f} s",
                        flush=True,
                    )
                if found is None:
                    continue
                if found.signature in findings:
                    findings[found.signature].count += 1
                    shutil.rmtree(work / f"case{found.case.id:05d}", ignore_errors=True)
                    continue
                findings[found.signature] = found
                if args.findings:
                    found.reproducer = save_reproducer(found, work, args.findings)
                print(f"fuzz: new failure: {found.signature}", flush=True)
        new = report(findings, known, len(cases), time.time() - start)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if new else 0


def load_known(path):
    """(regex, label) pairs: one `LABEL REGEX` per line, # comments."""
    known = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
        if line:
            label, _, pattern = line.partition(" ")
            known.append((re.compile(pattern.strip()), label))
    return known


def save_reproducer(f, work, folder):
    """Copies the case folder of finding `f` to `folder` with command.sh and
    message.txt; returns where."""
    key = hashlib.sha1(f.signature.encode()).hexdigest()[:10]
    src = Path(work) / f"case{f.case.id:05d}"
    dest = Path(folder) / f"{f.case.tool}-{f.case.mode}-{key}"
    shutil.rmtree(dest, ignore_errors=True)
    if src.exists():
        shutil.copytree(src, dest, symlinks=True)
    else:
        dest.mkdir(parents=True)
    (dest / "command.sh").write_text(
        "#!/bin/sh\n# " + f.signature + '\ncd "$(dirname "$0")"\n' + f.command + "\n"
    )
    (dest / "message.txt").write_text(f.message + "\n")
    return str(dest)


def report(findings, known, total, seconds):
    """Prints every finding; returns the number not covered by `known`."""
    new, seen = 0, set()
    for sig, f in sorted(findings.items()):
        label = next((lbl for rx, lbl in known if rx.search(sig)), None)
        if label:
            seen.add(label)
        else:
            new += 1
        where = f.reproducer
        print(f"KNOWN ({label}) {sig}" if label else f"FOUND {sig}")
        print(f"  {f.count} case(s); first: {f.case.detail}")
        print(f"  command (in the reproducer folder): {f.command}")
        if where:
            print(f"  reproducer: {where}")
        for line in f.message.splitlines()[:4]:
            print(f"  | {line[:200]}")
    for _, label in known:
        if label not in seen:
            print(f"not seen: known failure {label} (fixed? then drop it from the list)")
    print(
        f"fuzz: {total} runs in {seconds:.0f} s, {len(findings)} distinct failure signature(s), "
        f"{new} not known"
    )
    return new


if __name__ == "__main__":
    sys.exit(main())
