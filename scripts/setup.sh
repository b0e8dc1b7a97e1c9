#!/usr/bin/env bash
# Installs what the build needs (idempotent, quiet when everything is there),
# then configures and builds the project into ./build.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(cmake ninja-build g++ libmlir-22-dev mlir-22-tools llvm-22-dev
  llvm-22-tools openmpi-bin libopenmpi-dev libgtest-dev libbenchmark-dev
  libopenblas-dev python3-venv googletest)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# GoogleTest's sources, for the GPU check (bench/gpu/check.sh builds
# runtime/ alone with its GPU tests on a machine without a package registry):
# a copy inside the tree (ignored by git) travels with the check's files.
if [ ! -f third_party/googletest/googletest/CMakeLists.txt ]; then
  mkdir -p third_party
  rm -rf third_party/googletest
  cp -r /usr/src/googletest third_party/googletest
fi

# Python for lit, the model generator and the Python tests. Debian's
# interpreter (not whatever python3 is first on PATH), in a venv of our own.
if ! .venv/bin/python -c "import numpy, ml_dtypes, lit, pytest" 2>/dev/null; then
  echo "setup: creating .venv"
  /usr/bin/python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r python/requirements.txt
fi

# The PyTorch frontend (python/fsdp_mlir/torch) and its tests: torch and
# torch-mlir, pinned in python/requirements-torch.txt. PyTorch's default wheel
# brings CUDA libraries (about 5 GB); it runs on CPU. FSDP_NO_TORCH=1 skips
# them (the frontend's tests are then skipped).
if [ "${FSDP_NO_TORCH:-0}" != 1 ] &&
  ! .venv/bin/python -c "import torch, torch_mlir, transformers, timm, torchvision, peft" 2>/dev/null; then
  echo "setup: installing torch and torch-mlir into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r python/requirements-torch.txt
fi

# MKL for compute=fast steps on Intel CPUs (lib/Runner/Blas.h): the runner
# finds the wheel's libmkl_rt in .venv/lib at run time, else uses OpenBLAS.
if [ "${FSDP_NO_MKL:-0}" != 1 ] && [ "$(uname -m)" = x86_64 ] &&
  grep -q GenuineIntel /proc/cpuinfo 2>/dev/null &&
  ! ls .venv/lib/libmkl_rt.so.* >/dev/null 2>&1; then
  echo "setup: installing MKL into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -r python/requirements-mkl.txt
fi

if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DFSDP_PYTHON="$PWD/.venv/bin/python" >/tmp/fsdp-configure.log 2>&1 ||
    { cat /tmp/fsdp-configure.log; exit 1; }
fi
cmake --build build -j "${FSDP_JOBS:-$(nproc)}" | grep -Ev '^\[[0-9]+/[0-9]+\] ' || true
test "${PIPESTATUS[0]}" -eq 0
