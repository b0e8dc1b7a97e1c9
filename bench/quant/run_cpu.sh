#!/usr/bin/env bash
# CPU reference throughput of every quantization format, with a memcpy
# baseline of the same bytes measured in the same run.
#
#   bench/quant/run_cpu.sh [--smoke] [--rows 2048] [--cols 8192] [--reps 3]
#   bench/quant/run_cpu.sh --help
#
#   --rows R, --cols C   tensor shape (multiples of 32; 128 for the
#                        128x128 blocks)
#   --reps N             timed repetitions, the best is shown
#   --smoke              a [128 x 256] tensor, one repetition: checks that
#                        the script, the memcpy baseline and every format
#                        run (seconds; no timings worth reading)
#
# Binary: fsdprt_quant_cpu_bench of the main build (build/bin; FSDP_BUILD=dir
# for another) when present;
# otherwise runtime/quant is configured into BUILD_DIR (default build-quant)
# and built there. The script checks that the table has the memcpy baseline
# and every format for bf16 and f32, each with a positive GB/s.
set -euo pipefail
trap 'echo "bench/quant/run_cpu.sh: failed (exit $?) at line $LINENO: ${BASH_COMMAND%%$'\n'*}" >&2' ERR
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
fail() {
  echo "bench/quant/run_cpu.sh: $*" >&2
  exit 1
}
root=$(cd "$(dirname "$0")/../.." && pwd)
args=()
while [ $# -gt 0 ]; do
  case "$1" in
  -h | --help)
    usage
    exit 0
    ;;
  --smoke) args+=(--rows 128 --cols 256 --reps 1) ;;
  --rows | --cols | --reps)
    [ $# -ge 2 ] || fail "$1 needs a value"
    args+=("$1" "$2")
    shift
    ;;
  *) fail "unknown argument $1 (see --help)" ;;
  esac
  shift
done

bin=${FSDP_BUILD:-$root/build}/bin/fsdprt_quant_cpu_bench
if [ -n "${BUILD_DIR:-}" ] || [ ! -x "$bin" ]; then
  build=${BUILD_DIR:-$root/build-quant}
  echo "building fsdprt_quant_cpu_bench in $build" >&2
  gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root/runtime/quant" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  cmake --build "$build" --target fsdprt_quant_cpu_bench -j"${JOBS:-2}"
  bin=$build/fsdprt_quant_cpu_bench
fi
echo "binary: $bin" >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! "$bin" "${args[@]}" >"$out"; then
  cat "$out"
  fail "the benchmark failed: $bin ${args[*]}"
fi
cat "$out"
# Every row: op format dtype MiB ms GB/s vs-memcpy.
awk '
  NR > 2 && NF == 7 { seen[$1 " " $2 " " $3] = 1; if (!($6 > 0)) bad = bad " " $1 "/" $2 "/" $3 }
  END {
    n = split("memcpy -,amax -,quantize fp8_e4m3_tensor,quantize fp8_e5m2_tensor," \
              "quantize mxfp8_rowwise,quantize mxfp8_colwise,quantize nvfp4," \
              "quantize fp8_block_1x128,quantize fp8_block_128x128,dequantize fp8_e4m3_tensor," \
              "dequantize mxfp8_rowwise,dequantize nvfp4,dequantize fp8_block_1x128", want, ",")
    for (i = 1; i <= n; i++)
      for (d = 0; d < 2; d++) {
        key = want[i] " " (d ? "f32" : "bf16")
        if (!(key in seen)) missing = missing " [" key "]"
      }
    if (missing != "" || bad != "") {
      printf "bench/quant/run_cpu.sh: incomplete table: missing%s; no positive GB/s:%s\n", missing, bad > "/dev/stderr"
      exit 1
    }
  }' "$out" || exit 1
