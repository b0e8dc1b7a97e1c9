#!/usr/bin/env python3
"""Checks the shell commands that the documentation gives.

Extracts every command from the fenced ```sh blocks of README.md and
docs/*.md (or of the files given) and checks, without running the command
itself, that it names something that exists and that its flags are accepted:

- `make T`: T is a target of the Makefile;
- `ninja -C build T...`: every T is a target of the build;
- `cmake ...`: a -S folder holds a CMakeLists.txt, every -D variable is a
  CMake/find_package variable or an option or cache variable of the project,
  every flag is in `cmake --help` (or `cmake --build` / `cmake --install`);
- `ctest ...`: every flag is in `ctest --help`;
- `build/bin/TOOL ...` (and `fsdp-opt`, `fsdp-run`): the tool is built and
  every flag is in `TOOL --help`; for a pass or pipeline flag
  (`--fsdp-pipeline="lower=true ..."`) every option key is one of the
  pass's options;
- `PYTHON -m MODULE [SUBCOMMAND] ...`: the module can be imported and every
  flag is in `PYTHON -m MODULE [SUBCOMMAND] --help`;
- a script of the repository (`bench/.../run.sh`, `scripts/...`): it exists,
  is executable, and every flag is in `SCRIPT --help`.
A command of any other kind is an error: add a rule here. (The benchmark
scripts' smoke modes, which run them, are separate tests: bench-smoke/*.)

usage: check_doc_commands.py --root SRC --build BUILD [FILE.md ...]
Prints one line per problem (FILE:LINE: command: problem); exit 1 if any.
"""

import argparse
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

OPERATORS = {"&&", "||", ";", "|", "&"}
ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# -D variables that come from CMake or find_package, not from this project.
CMAKE_VAR = re.compile(
    r"^(CMAKE_|Python3?_|MPI_|CUDAToolkit_|GTest_|MLIR_DIR|LLVM_DIR)"
)


def extract(path):
    """(line number, command text) of every command in the ```sh blocks."""
    commands, block, start, pending = [], False, 0, ""
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        fence = line.strip()
        if fence.startswith("```"):
            block = fence == "```sh"
            pending = ""
            continue
        if not block:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        if text and not text.startswith("#"):
            commands.append((start, text))
    return commands


def split_commands(text):
    """The simple commands of a command line, each without its env prefix."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words, out = list(lexer), [[]]
    for w in words:
        if w in OPERATORS:
            out.append([])
        else:
            out[-1].append(w)
    result = []
    for argv in out:
        while argv and ENV_ASSIGN.match(argv[0]):
            argv = argv[1:]
        if argv:
            result.append(argv)
    return result


@functools.cache
def help_text(*cmd, cwd=None, env_pythonpath=None):
    env = dict(os.environ)
    if env_pythonpath:
        env["PYTHONPATH"] = env_pythonpath
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return None, str(err)
    return proc.stdout + proc.stderr, proc.returncode


def flag_name(word):
    return word.split("=", 1)[0]


def flags_of(argv):
    return [w for w in argv if w.startswith("-") and w not in ("-", "--")]


def flag_in(flag, text):
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text) is not None


def accepted(word, text):
    """Whether the help text mentions the flag of `word` (`-j2` as `-j`)."""
    flag = flag_name(word)
    if flag_in(flag, text):
        return True
    return re.fullmatch(r"-[A-Za-z]\d+", flag) is not None and flag_in(flag[:2], text)


def check_flags(argv, text, what):
    """Problems: flags of argv that the help text does not mention."""
    return [
        f"flag {flag_name(f)} is not accepted by {what} (not in its --help)"
        for f in flags_of(argv)
        if not accepted(f, text)
    ]


class Checker:
    def __init__(self, root, build):
        self.root = Path(root).resolve()
        self.build = Path(build).resolve()
        self._ninja_targets = None
        self._cache_vars = None

    def repo_path(self, word):
        path = (self.root / word).resolve()
        return path if path.is_relative_to(self.root) else None

    # --- rules ----------------------------------------------------------
    def check(self, argv):
        cmd = argv[0]
        name = os.path.basename(cmd)
        if cmd == "make":
            return self.check_make(argv)
        if cmd == "ninja":
            return self.check_ninja(argv)
        if cmd == "cmake":
            return self.check_cmake(argv)
        if cmd == "mpirun":
            return self.check_mpirun(argv)
        if cmd == "ctest":
            text, _ = help_text("ctest", "--help")
            return check_flags(argv[1:], text or "", "ctest")
        if re.fullmatch(r"python3?(\.\d+)?", name):
            return self.check_python(argv)
        if name == "nvcc":
            return self.check_nvcc(argv)
        if cmd.startswith("build/bin/") or cmd in ("fsdp-opt", "fsdp-run"):
            return self.check_tool(argv)
        path = self.repo_path(cmd)
        if path and "/" in cmd and path.exists():
            return self.check_script(argv, path)
        if "/" in cmd:
            return [f"{cmd} does not exist"]
        return [f"no rule to check the command {cmd!r}: add one to {__file__}"]

    def check_nvcc(self, argv):
        """The CUDA compiler (the toolkit's, as `CUDA_HOME` or
        /usr/local/cuda, else on PATH): its flags against its --help and
        the project's source files it names. Without a toolkit there is
        nothing to check against."""
        toolkit = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
        nvcc = str(toolkit) if toolkit.exists() else shutil.which("nvcc")
        if not nvcc:
            return []
        text, _ = help_text(nvcc, "--help")
        problems = check_flags(argv[1:], text or "", "nvcc")
        for word in argv[1:]:
            if word.endswith((".cu", ".cpp")):
                path = self.repo_path(word)
                if not path or not path.exists():
                    problems.append(f"{word} does not exist")
        return problems

    def check_mpirun(self, argv):
        """The command mpirun launches, after mpirun's own options (those
        with a value: -np / -n / --host / -x)."""
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            i += 2 if argv[i] in ("-np", "-n", "--host", "-H", "-x") else 1
        if i >= len(argv):
            return ["mpirun launches no command"]
        return self.check(argv[i:])

    def check_make(self, argv):
        makefile = (self.root / "Makefile").read_text()
        targets = set()
        for m in re.finditer(r"^([A-Za-z0-9_.\- ]+):(?!=)", makefile, re.MULTILINE):
            targets.update(m.group(1).split())
        goals = [w for w in argv[1:] if not w.startswith("-") and "=" not in w]
        return [f"make has no target {t!r}" for t in goals if t not in targets]

    def ninja_targets(self):
        if self._ninja_targets is not None:
            return self._ninja_targets
        text, rc = help_text("ninja", "-C", str(self.build), "-t", "targets", "all")
        if rc != 0:
            return None
        self._ninja_targets = {
            line.split(":")[0] for line in text.splitlines() if ":" in line
        }
        return self._ninja_targets

    def check_ninja(self, argv):
        words, problems, i = argv[1:], [], 0
        folder, targets = None, []
        while i < len(words):
            w = words[i]
            if w == "-C":
                folder, i = words[i + 1] if i + 1 < len(words) else "", i + 2
                continue
            if w in ("-j", "-l", "-k", "-f", "-t", "-d", "-w"):
                i += 2
                continue
            if w.startswith("-"):
                i += 1
                continue
            targets.append(w)
            i += 1
        if folder != "build":
            return [f"ninja -C {folder}: only the main build (build) can be checked"]
        known = self.ninja_targets()
        if known is None:
            return [f"cannot list the targets of {self.build}"]
        for t in targets:
            if t not in known:
                problems.append(f"the build has no target {t!r}")
        return problems

    def project_cache_vars(self):
        if self._cache_vars is not None:
            return self._cache_vars
        names = set()
        for cm in self.root.rglob("CMakeLists.txt"):
            if any(p in (".venv", ".git") or p.startswith("build") for p in cm.parts):
                continue
            text = cm.read_text(errors="replace")
            names.update(re.findall(r"\boption\(\s*([A-Za-z0-9_]+)", text))
            names.update(
                re.findall(
                    r"\bset\(\s*([A-Za-z0-9_]+)\s[^)]*\bCACHE\b", text, re.DOTALL
                )
            )
        self._cache_vars = names
        return names

    def check_cmake(self, argv):
        words, problems = argv[1:], []
        if words and words[0] in ("--build", "--install"):
            text, _ = help_text("cmake", words[0])
            rest = words[1:]
            problems += check_flags(rest, text or "", f"cmake {words[0]}")
            return problems
        text, _ = help_text("cmake", "--help")
        i = 0
        while i < len(words):
            w = words[i]
            if w.startswith("-D"):
                var = (w[2:] or (words[i + 1] if i + 1 < len(words) else "")).split(
                    "="
                )[0]
                var = var.split(":")[0]
                if not (CMAKE_VAR.match(var) or var in self.project_cache_vars()):
                    problems.append(
                        f"-D{var} is no option or cache variable of the project"
                    )
                i += 1 if w[2:] else 2
                continue
            if w == "-S":
                src = words[i + 1] if i + 1 < len(words) else ""
                path = self.repo_path(src)
                if not path or not (path / "CMakeLists.txt").exists():
                    problems.append(f"-S {src}: no CMakeLists.txt there")
                i += 2
                continue
            if w in ("-B", "-G"):
                i += 2
                continue
            if w.startswith("-") and not accepted(w, text or ""):
                problems.append(f"flag {flag_name(w)} is not accepted by cmake")
            i += 1
        return problems

    def check_python(self, argv):
        words = argv[1:]
        if "-m" not in words:
            if words and self.repo_path(words[0]) and (self.root / words[0]).exists():
                return []
            return ["only `python -m MODULE` and `python FILE` commands are checked"]
        at = words.index("-m")
        module, rest = words[at + 1], words[at + 2 :]
        pythonpath = str(self.root / "python")
        python = str(self.root / ".venv/bin/python")
        if not os.path.exists(python):
            python = sys.executable
        probe = (
            "import importlib.util, sys; "
            f"sys.exit(importlib.util.find_spec({module!r}) is None)"
        )
        _, rc = help_text(
            python, "-c", probe, cwd=str(self.root), env_pythonpath=pythonpath
        )
        if rc != 0:
            return [f"python module {module} cannot be imported"]
        prefix = [python, "-m", module]
        if module == "pytest":
            # pytest's --help includes the options of the conftest.py files of
            # the paths given.
            prefix += [w for w in rest if not w.startswith("-")]
        else:
            text, _ = help_text(
                *prefix, "--help", cwd=str(self.root), env_pythonpath=pythonpath
            )
            subs = re.search(r"\{([\w,-]+)\}", text or "")
            positional = [w for w in rest if not w.startswith("-")]
            if subs and positional and positional[0] in subs.group(1).split(","):
                prefix.append(positional[0])
        text, _ = help_text(
            *prefix, "--help", cwd=str(self.root), env_pythonpath=pythonpath
        )
        return check_flags(rest, text or "", " ".join(["python"] + prefix[1:]))

    def check_tool(self, argv):
        name = argv[0].removeprefix("build/bin/")
        tool = self.build / "bin" / name
        if not os.access(tool, os.X_OK):
            return [f"{argv[0]}: no such tool in the build ({tool})"]
        text, _ = help_text(str(tool), "--help")
        text = text or ""
        passes = self.pass_options(text)
        problems = []
        for word in flags_of(argv[1:]):
            flag = flag_name(word)
            if not accepted(word, text):
                problems.append(
                    f"flag {flag} is not accepted by {name} (not in its --help)"
                )
                continue
            if flag in passes and "=" in word:
                for item in word.split("=", 1)[1].split():
                    key = item.split("=", 1)[0]
                    if key not in passes[flag]:
                        problems.append(f"{flag} has no option {key!r}")
        return problems

    @staticmethod
    def pass_options(text):
        """{--pass: {option, ...}} from an mlir-opt style --help."""
        options, stack = {}, []  # stack: (flag, indentation) of the enclosing flags
        for line in text.splitlines():
            m = re.match(r"^(\s*)(--[\w.-]+)", line)
            if not m:
                continue
            depth, flag = len(m.group(1)), m.group(2)
            while stack and stack[-1][1] >= depth:
                stack.pop()
            if stack:
                options[stack[-1][0]].add(flag[2:].split("=")[0])
            options.setdefault(flag, set())
            stack.append((flag, depth))
        return {k: v for k, v in options.items() if v}

    def check_script(self, argv, path):
        if not os.access(path, os.X_OK):
            return [f"{argv[0]} is not executable"]
        if not flags_of(argv[1:]):
            return []
        text, rc = help_text(str(path), "--help", cwd=str(self.root))
        if rc != 0:
            return [f"{argv[0]} --help fails (exit {rc})"]
        return check_flags(argv[1:], text or "", argv[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="source tree")
    ap.add_argument("--build", required=True, help="the main build folder")
    ap.add_argument(
        "files", nargs="*", help="Markdown files (default: README.md docs/*.md)"
    )
    args = ap.parse_args()
    root = Path(args.root)
    files = [Path(f) for f in args.files] or [
        root / "README.md",
        *sorted(root.glob("docs/*.md")),
    ]
    checker = Checker(root, args.build)
    problems = checked = 0
    for md in files:
        for line, text in extract(md):
            for argv in split_commands(text):
                checked += 1
                for problem in checker.check(argv):
                    problems += 1
                    shown = md.relative_to(root) if md.is_relative_to(root) else md
                    print(f"{shown}:{line}: {' '.join(argv)}: {problem}")
    print(f"{checked} commands checked, {problems} problems")
    return 1 if problems or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
