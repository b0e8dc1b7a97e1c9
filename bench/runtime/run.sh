#!/usr/bin/env bash
# Runtime collectives benchmark: fsdprt threads backend (4 rank threads) vs
# a single-thread memcpy of the same bytes vs Open MPI (4 processes).
#
#   bench/runtime/run.sh [build-dir]
#
# build-dir defaults to build-runtime (configured from runtime/ and built
# when the benchmark binaries are missing). Environment:
#   FSDPRT_BENCH_ROUNDS     alternating threads / MPI rounds (default 3);
#                           the table shows the median over rounds
#   FSDPRT_BENCH_SIZES_MIB  comma-separated sizes (default 1,16,64)
#   FSDPRT_BENCH_BATCHES    timed batches per measurement (default 7)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$ROOT/build-runtime}
ROUNDS=${FSDPRT_BENCH_ROUNDS:-3}

find_bin() {
  find "$BUILD" -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1
}

THREADS_BIN=$(find_bin fsdprt_bench_threads)
MPI_BIN=$(find_bin fsdprt_bench_mpi)
if [[ -z "$THREADS_BIN" ]]; then
  cmake -S "$ROOT/runtime" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFSDPRT_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j2 --target fsdprt_bench_threads fsdprt_bench_mpi
  THREADS_BIN=$(find_bin fsdprt_bench_threads)
  MPI_BIN=$(find_bin fsdprt_bench_mpi)
fi

MPIRUN=${MPIEXEC:-mpirun}
MPI_FLAGS=()
if "$MPIRUN" --version 2>/dev/null | grep -q "Open MPI"; then
  MPI_FLAGS=(--allow-run-as-root --oversubscribe)
fi

RESULTS=$(mktemp)
trap 'rm -f "$RESULTS"' EXIT
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")

for ((round = 1; round <= ROUNDS; round++)); do
  echo "round $round/$ROUNDS: threads backend + memcpy" >&2
  "$THREADS_BIN" | grep '^RESULT' >>"$RESULTS"
  if [[ -n "$MPI_BIN" ]]; then
    echo "round $round/$ROUNDS: Open MPI, 4 processes" >&2
    "$MPIRUN" -np 4 "${MPI_FLAGS[@]}" "$MPI_BIN" | grep '^RESULT' >>"$RESULTS"
  fi
done

echo "load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")" \
  "(nproc $(nproc)); $ROUNDS alternating rounds, median shown"
/usr/bin/env python3 - "$RESULTS" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    _, impl, kind, mib, ms = line.split()
    times.setdefault((impl, kind, int(mib)), []).append(float(ms))
med = {k: statistics.median(v) for k, v in times.items()}
sizes = sorted({k[2] for k in med})
def cell(v):
    return f"{v:10.3f}" if v is not None else f"{'-':>10}"
def ratio(a, b):
    return f"{a / b:8.2f}x" if a is not None and b else f"{'-':>9}"
print("sizes: all_gather = receive bytes per rank, reduce_scatter = send "
      "bytes per rank, all_reduce = buffer bytes; f32, sum; 4 ranks")
print(f"{'collective':<15}{'MiB':>5}{'memcpy ms':>11}{'threads ms':>11}"
      f"{'OpenMPI ms':>11}{'thr/MPI':>10}{'thr/memcpy':>11}")
for kind in ("all_gather", "reduce_scatter", "all_reduce"):
    for mib in sizes:
        mc = med.get(("memcpy", "copy", mib))
        th = med.get(("threads", kind, mib))
        mp = med.get(("openmpi", kind, mib))
        print(f"{kind:<15}{mib:>5} {cell(mc)} {cell(th)} {cell(mp)} "
              f"{ratio(th, mp)} {ratio(th, mc)}")
PY
