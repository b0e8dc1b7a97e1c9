# lit configuration for the fsdp-opt test suite.
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "fsdp"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "CMakeLists.txt"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdp_obj_root, "test")

llvm_config.with_system_environment(["HOME", "TMPDIR", "PATH", "FSDP_BLAS", "FSDP_MKL_LIBRARY"])
llvm_config.use_default_substitutions()

# Ahead of lit's own %python (the interpreter running lit).
config.substitutions.insert(0, ("%python", config.python_executable))
config.substitutions.append(("%fsdp_src", config.fsdp_src_root))
config.substitutions.append(("%fsdp_obj", config.fsdp_obj_root))
config.environment["PYTHONPATH"] = os.path.join(config.fsdp_src_root, "python")
# fsdp-run's JIT object cache: inside the build tree, not the user's home.
config.environment["FSDP_JIT_CACHE_DIR"] = os.path.join(config.fsdp_obj_root, "test", "jit-cache")

tool_dirs = [config.fsdp_tools_dir, config.llvm_tools_dir]
fsdp_run = ToolSubst("fsdp-run", unresolved="ignore")
# --param fsdp_aot=1: every fsdp-run also runs the step compiled ahead of
# time and requires the same results (Integration/Inputs/aot_check.py);
# --param fsdp_aot_runner=PATH runs the step libraries with another fsdp-run
# (one built from runtime/ alone, with no LLVM).
if lit_config.params.get("fsdp_aot") == "1":
    check = os.path.join(config.fsdp_src_root, "test", "Integration", "Inputs", "aot_check.py")
    runner = lit_config.params.get("fsdp_aot_runner")
    runner_flag = f" --aot-runner={runner}" if runner else ""
    fsdp_run = ToolSubst(
        "fsdp-run",
        command=f"{config.python_executable} {check} --tools={config.fsdp_tools_dir}"
        + runner_flag,
    )
tools = [
    "fsdp-opt",
    fsdp_run,
    ToolSubst("fsdp-compile", unresolved="ignore"),
    "mlir-opt",
    "mlir-translate",
    "llc",
    "FileCheck",
    "not",
    "split-file",
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
for name in ["fsdp-run", "fsdp-embed-example", "fsdp-compile"]:
    if os.path.exists(os.path.join(config.fsdp_tools_dir, name)):
        config.available_features.add(name)
# torch in the tests' interpreter (python -m fsdp_mlir.checkpoint to-torch).
has_torch = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
if subprocess.run([config.python_executable, "-c", has_torch], check=False).returncode == 0:
    config.available_features.add("torch")
# The CUDA toolkit compute=gpu compiles kernels with (no GPU needed).
cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
if os.access(os.path.join(cuda_home, "bin", "ptxas"), os.X_OK) and os.path.exists(
    os.path.join(cuda_home, "nvvm", "libdevice", "libdevice.10.bc")
):
    config.available_features.add("cuda-toolkit")
llvm_config.with_system_environment(["CUDA_HOME"])
# The libfsdprt built over the host emulation of CUDA (fsdp-run runs
# gpu-emulation=true steps on it with LD_LIBRARY_PATH=%fsdp_obj/lib/cuda-emulation).
if os.path.exists(os.path.join(config.fsdp_obj_root, "lib", "cuda-emulation", "libfsdprt.so")):
    config.available_features.add("cuda-emulation")
if config.mpirun and "fsdp-run" in config.available_features:
    config.available_features.add("mpi")
    # OpenMPI refuses to run as root unless told, and the CI machine has
    # fewer cores than ranks.
    flags = " --oversubscribe"
    if os.geteuid() == 0:
        flags += " --allow-run-as-root"
    # Under scripts/sanitize.sh: Open MPI's components are unloaded at
    # MPI_Finalize with their allocations alive (leaks of an unknown module
    # that no suppression can name), so MPI ranks run without leak checks,
    # as the mpi unit tests do.
    asan = os.environ.get("ASAN_OPTIONS")
    if os.environ.get("FSDP_SANITIZE") and asan:
        asan = asan.replace("detect_leaks=1", "detect_leaks=0")
        flags += f" -x ASAN_OPTIONS={asan}"
    config.substitutions.append(("%mpirun", config.mpirun + flags))
