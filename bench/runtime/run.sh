#!/usr/bin/env bash
# Runtime collectives benchmark: fsdprt threads backend (4 rank threads) vs
# a single-thread memcpy of the same bytes vs Open MPI (4 processes). Every
# collective's result is checked after its timed batches.
#
#   bench/runtime/run.sh [--smoke] [build-dir]
#   bench/runtime/run.sh --help
#
# Binaries: those of build-dir when given; otherwise those of the main build
# (build/bin, built by `make build`; FSDP_BUILD=dir for another) when
# present; otherwise the script configures runtime/ into build-runtime and
# builds them there.
#
#   --smoke   1 MiB, one batch, one round: checks that the script, both
#             baselines and the result checks work (seconds; no timings
#             worth reading)
#
# Environment:
#   FSDPRT_BENCH_ROUNDS     alternating threads / MPI rounds (default 3);
#                           the table shows the median over rounds
#   FSDPRT_BENCH_SIZES_MIB  comma-separated sizes (default 1,16,64)
#   FSDPRT_BENCH_BATCHES    timed batches per measurement (default 7)
#   MPIEXEC                 the MPI launcher (default mpirun)
# Without an MPI launcher or MPI build the Open MPI column is skipped (the
# script says so); with --smoke that is an error.
set -euo pipefail
trap 'echo "bench/runtime/run.sh: failed (exit $?) at line $LINENO: ${BASH_COMMAND%%$'\n'*}" >&2' ERR

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
fail() {
  echo "bench/runtime/run.sh: $*" >&2
  exit 1
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SMOKE=0
BUILD=
for arg in "$@"; do
  case "$arg" in
  --smoke) SMOKE=1 ;;
  -h | --help)
    usage
    exit 0
    ;;
  -*) fail "unknown option $arg (see --help)" ;;
  *)
    [[ -z "$BUILD" ]] || fail "more than one build directory given"
    BUILD=$arg
    ;;
  esac
done

if ((SMOKE)); then
  export FSDPRT_BENCH_SIZES_MIB=1 FSDPRT_BENCH_BATCHES=1
  ROUNDS=1
else
  ROUNDS=${FSDPRT_BENCH_ROUNDS:-3}
fi

# First executable named $2 under directory $1 (nothing if $1 is missing).
find_bin() {
  [[ -d "$1" ]] || return 0
  find "$1" -type f -name "$2" -perm -u+x 2>/dev/null | head -n 1
}

if [[ -n "$BUILD" ]]; then
  [[ -d "$BUILD" ]] || fail "build directory $BUILD does not exist"
elif [[ -x "${FSDP_BUILD:-$ROOT/build}/bin/fsdprt_bench_threads" ]]; then
  BUILD=${FSDP_BUILD:-$ROOT/build}
else
  BUILD=$ROOT/build-runtime
fi
THREADS_BIN=$(find_bin "$BUILD" fsdprt_bench_threads)
MPI_BIN=$(find_bin "$BUILD" fsdprt_bench_mpi)
if [[ -z "$THREADS_BIN" ]]; then
  echo "no benchmark binaries in $BUILD: configuring runtime/ there and building them" >&2
  GEN=()
  command -v ninja >/dev/null && GEN=(-G Ninja)
  cmake -S "$ROOT/runtime" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DFSDPRT_BUILD_BENCH=ON >/dev/null
  TARGETS=(fsdprt_bench_threads)
  cmake --build "$BUILD" --target help 2>/dev/null | grep -q fsdprt_bench_mpi &&
    TARGETS+=(fsdprt_bench_mpi)
  cmake --build "$BUILD" -j"${JOBS:-2}" --target "${TARGETS[@]}"
  THREADS_BIN=$(find_bin "$BUILD" fsdprt_bench_threads)
  MPI_BIN=$(find_bin "$BUILD" fsdprt_bench_mpi)
  [[ -n "$THREADS_BIN" ]] || fail "the build did not produce fsdprt_bench_threads"
fi
echo "binaries: $THREADS_BIN${MPI_BIN:+, $MPI_BIN}" >&2

MPIRUN=${MPIEXEC:-mpirun}
MPI_FLAGS=()
if [[ -z "$MPI_BIN" ]]; then
  ((SMOKE == 0)) || fail "fsdprt_bench_mpi was not built (MPI not found at configure time)"
  echo "Open MPI baseline skipped: fsdprt_bench_mpi was not built (MPI not found at configure time)" >&2
elif ! command -v "$MPIRUN" >/dev/null; then
  ((SMOKE == 0)) || fail "no MPI launcher $MPIRUN"
  echo "Open MPI baseline skipped: no MPI launcher $MPIRUN (set MPIEXEC)" >&2
  MPI_BIN=
elif "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI"; then
  MPI_FLAGS=(--oversubscribe)
  [[ $(id -u) -ne 0 ]] || MPI_FLAGS+=(--allow-run-as-root)
fi

RESULTS=$(mktemp)
OUT=$(mktemp)
trap 'rm -f "$RESULTS" "$OUT"' EXIT
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

# Runs a benchmark command, appends its RESULT lines; on failure shows its
# output and stops.
measure() {
  if ! "$@" >"$OUT" 2>&1; then
    cat "$OUT" >&2
    fail "benchmark failed: $*"
  fi
  grep '^RESULT' "$OUT" >>"$RESULTS" || fail "no results from: $*"
}

for ((round = 1; round <= ROUNDS; round++)); do
  echo "round $round/$ROUNDS: threads backend + memcpy" >&2
  measure "$THREADS_BIN"
  if [[ -n "$MPI_BIN" ]]; then
    echo "round $round/$ROUNDS: Open MPI, 4 processes" >&2
    measure "$MPIRUN" -np 4 "${MPI_FLAGS[@]}" "$MPI_BIN"
  fi
done

echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")" \
  "(nproc $(nproc)); $ROUNDS alternating rounds, median shown"
PYTHON=python3
[[ -x "$ROOT/.venv/bin/python" ]] && PYTHON=$ROOT/.venv/bin/python
"$PYTHON" - "$RESULTS" "${MPI_BIN:+openmpi}" <<'PY'
import math, statistics, sys
times = {}
for line in open(sys.argv[1]):
    _, impl, kind, mib, ms = line.split()
    times.setdefault((impl, kind, int(mib)), []).append(float(ms))
med = {k: statistics.median(v) for k, v in times.items()}
sizes = sorted({k[2] for k in med})
kinds = ("all_gather", "reduce_scatter", "all_reduce")
# Every size has every measurement, each a positive time.
impls = [("memcpy", ("copy",)), ("threads", kinds)]
if sys.argv[2]:
    impls.append(("openmpi", kinds))
missing = [f"{i} {k} {m} MiB" for m in sizes for i, ks in impls for k in ks
           if (i, k, m) not in med]
bad = [f"{k} = {v}" for k, v in med.items() if not (v > 0 and math.isfinite(v))]
if not sizes or missing or bad:
    sys.exit(f"bench/runtime/run.sh: incomplete results: missing {missing or sizes}, bad {bad}")
def cell(v):
    return f"{v:10.3f}" if v is not None else f"{'-':>10}"
def ratio(a, b):
    return f"{a / b:8.2f}x" if a is not None and b else f"{'-':>9}"
print("sizes: all_gather = receive bytes per rank, reduce_scatter = send "
      "bytes per rank, all_reduce = buffer bytes; f32, sum; 4 ranks")
print(f"{'collective':<15}{'MiB':>5}{'memcpy ms':>11}{'threads ms':>11}"
      f"{'OpenMPI ms':>11}{'thr/MPI':>10}{'thr/memcpy':>11}")
for kind in kinds:
    for mib in sizes:
        mc = med.get(("memcpy", "copy", mib))
        th = med.get(("threads", kind, mib))
        mp = med.get(("openmpi", kind, mib))
        print(f"{kind:<15}{mib:>5} {cell(mc)} {cell(th)} {cell(mp)} "
              f"{ratio(th, mp)} {ratio(th, mc)}")
PY
