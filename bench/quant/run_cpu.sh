#!/usr/bin/env bash
# CPU reference throughput of every quantization format, with a memcpy
# baseline of the same bytes measured in the same run. Extra arguments go to
# the benchmark (--rows R --cols C --reps N).
#   bench/quant/run_cpu.sh [--rows 2048 --cols 8192 --reps 3]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-quant}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root/runtime/quant" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" --target fsdprt_quant_cpu_bench -j"${JOBS:-2}"
"$build/fsdprt_quant_cpu_bench" "$@"
