// Open MPI baseline: MPI_Allgather / MPI_Reduce_scatter_block /
// MPI_Allreduce with one process per rank (run under mpirun -np 4).
#include "bench_common.h"

#include <mpi.h>

#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const char *kinds[] = {"all_gather", "reduce_scatter", "all_reduce"};
  for (int mib : bench::sizes_mib()) {
    const int elems = int((size_t(mib) << 20) / 4);
    const int iters = bench::iters_for(mib);
    for (int kind = 0; kind < 3; ++kind) {
      int send_elems = kind == 0 ? elems / ranks : elems;
      int recv_elems = kind == 1 ? elems / ranks : elems;
      std::vector<float> send(size_t(send_elems), float(rank + 1)),
          recv(size_t(recv_elems), 0.0f);
      std::vector<double> times;
      for (int b = 0; b < bench::batches() + 1; ++b) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; ++i) {
          if (kind == 0)
            MPI_Allgather(send.data(), send_elems, MPI_FLOAT, recv.data(),
                          send_elems, MPI_FLOAT, MPI_COMM_WORLD);
          else if (kind == 1)
            MPI_Reduce_scatter_block(send.data(), recv.data(), recv_elems,
                                     MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          else
            MPI_Allreduce(send.data(), recv.data(), recv_elems, MPI_FLOAT,
                          MPI_SUM, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (b > 0)
          times.push_back((MPI_Wtime() - t0) / iters);
      }
      if (!bench::check_result("openmpi", kind, rank, ranks, recv.data(),
                               recv.size()))
        MPI_Abort(MPI_COMM_WORLD, 1);
      if (rank == 0)
        bench::report("openmpi", kinds[kind], mib, 1e3 * bench::median(times));
    }
  }
  MPI_Finalize();
  return 0;
}
