/* A peer that never takes part in MPI start-up must not keep the others
 * waiting: fsdprt_mpi_comm_create's watchdog ends them after the timeout and
 * mpirun ends the job (docs/RUNTIME.md, "start-up and shutdown have the
 * timeout too").
 *
 *   test_mpi_startup init    the runtime initializes MPI; the last rank
 *                            sleeps before it does
 *   test_mpi_startup create  this program initializes MPI; the last rank
 *                            sleeps before creating the communicator (whose
 *                            MPI_Comm_dup/MPI_Comm_split are world-wide)
 *
 * The others print "timeout after 1 s in ..." and exit; ctest checks the
 * message and that the job ends well before the sleeping rank would. */
#include "fsdprt.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "init") && strcmp(argv[1], "create"))) {
    fprintf(stderr, "usage: test_mpi_startup init|create\n");
    return 2;
  }
  const char *env = getenv("OMPI_COMM_WORLD_RANK");
  if (!env)
    env = getenv("PMI_RANK");
  const char *size_env = getenv("OMPI_COMM_WORLD_SIZE");
  if (!size_env)
    size_env = getenv("PMI_SIZE");
  if (!env || !size_env) {
    fprintf(stderr, "run under mpirun\n");
    return 2;
  }
  int rank = atoi(env), size = atoi(size_env);
  int late = rank == size - 1;
  if (strcmp(argv[1], "create") == 0)
    MPI_Init(&argc, &argv);
  if (late)
    sleep(60);
  fsdprt_options_t options;
  fsdprt_options_init(&options);
  options.timeout_s = 1;
  int64_t shape[1] = {size};
  fsdprt_comm_t *comm = NULL;
  fsdprt_status_t st = fsdprt_mpi_comm_create(1, shape, &options, &comm);
  printf("rank %d: created (%d), nobody waited for the late rank\n", rank,
         (int)st);
  return 1;
}
