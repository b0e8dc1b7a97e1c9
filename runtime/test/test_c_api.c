/* The public headers compiled as C99 and used from C threads. */
#include "fsdprt.h"
#include "fsdprt_gpu.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define RANKS 3
#define COUNT 5

static fsdprt_world_t *world;
static int failures;
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, long rank) {
  pthread_mutex_lock(&fail_mu);
  fprintf(stderr, "rank %ld: %s\n", rank, what);
  ++failures;
  pthread_mutex_unlock(&fail_mu);
}

/* The rank's arena: reserved on this thread, reused by a smaller request,
 * grown by a larger one; planned buffers marked live and dead. */
static void check_arena(fsdprt_comm_t *comm, long rank) {
  char *base;
  if (fsdprt_arena_bytes(comm) != 0 ||
      fsdprt_arena_reserve(comm, 1000) != FSDPRT_OK ||
      fsdprt_arena_bytes(comm) != 1000)
    fail("arena reserve", rank);
  base = (char *)fsdprt_jit_arena(1000);
  if (!base || (uintptr_t)base % 64 != 0)
    fail("arena base", rank);
  fsdprt_jit_arena_unpoison(base + 64, 16);
  memset(base + 64, 1, 16);
  fsdprt_jit_arena_poison(base + 64, 16);
  if ((char *)fsdprt_jit_arena(500) != base)
    fail("arena reused", rank);
  if (!fsdprt_jit_arena(1 << 20) || fsdprt_arena_bytes(comm) != 1 << 20)
    fail("arena grown", rank);
  if (fsdprt_arena_reserve(comm, -1) != FSDPRT_ERR_INVALID_ARGUMENT)
    fail("arena of negative size", rank);
}

static void *rank_main(void *arg) {
  long rank = (long)arg;
  fsdprt_comm_t *comm = NULL;
  float send[COUNT], recv[RANKS * COUNT];
  double sum_in, sum_out = 0;
  fsdprt_request_t req = NULL;
  fsdprt_stats_t stats;
  int i, j;
  if (fsdprt_threads_comm(world, rank, &comm) != FSDPRT_OK) {
    fail("threads_comm", rank);
    return NULL;
  }
  for (i = 0; i < COUNT; ++i)
    send[i] = (float)(rank * 100 + i);
  if (fsdprt_all_gather_async(comm, 1, send, recv, COUNT, FSDPRT_F32, &req) !=
          FSDPRT_OK ||
      fsdprt_wait(&req) != FSDPRT_OK || req != NULL)
    fail("all_gather", rank);
  for (j = 0; j < RANKS; ++j)
    for (i = 0; i < COUNT; ++i)
      if (recv[j * COUNT + i] != (float)(j * 100 + i))
        fail("all_gather data", rank);
  /* jit entry point: plain C types, int32 dtype and op. */
  fsdprt_set_thread_comm(comm);
  sum_in = (double)rank;
  fsdprt_jit_all_reduce(&sum_in, &sum_out, 1, (int32_t)FSDPRT_F64,
                        (int32_t)FSDPRT_SUM, 1);
  if (fsdprt_comm_error(comm) != FSDPRT_OK || sum_out != 0.0 + 1.0 + 2.0)
    fail("jit all_reduce", rank);
  check_arena(comm, rank);
  fsdprt_set_thread_comm(NULL);
  if (fsdprt_comm_get_stats(comm, &stats) != FSDPRT_OK ||
      stats.calls[FSDPRT_KIND_ALL_GATHER] != 1 ||
      stats.calls[FSDPRT_KIND_ALL_REDUCE] != 1 || stats.total_calls != 2)
    fail("stats", rank);
  return NULL;
}

int main(void) {
  int64_t shape[1] = {RANKS};
  const char *names[1] = {"shard"};
  fsdprt_options_t options;
  pthread_t threads[RANKS];
  long r;
  fsdprt_options_init(&options);
  options.axis_names = names;
  /* The GPU runtime answers without a GPU: a device count or a reason. */
  {
    int32_t gpus = -1;
    fsdprt_status_t st = fsdprt_gpu_device_count(&gpus);
    if (st != FSDPRT_OK && (gpus != 0 || !fsdprt_gpu_last_error_message()[0]) &&
        fsdprt_gpu_built()) {
      fprintf(stderr, "fsdprt_gpu_device_count: no count and no reason\n");
      return 1;
    }
  }
  if (fsdprt_threads_world_create(1, shape, &options, &world) != FSDPRT_OK) {
    fprintf(stderr, "world_create failed\n");
    return 1;
  }
  for (r = 0; r < RANKS; ++r)
    pthread_create(&threads[r], NULL, rank_main, (void *)r);
  for (r = 0; r < RANKS; ++r)
    pthread_join(threads[r], NULL);
  fsdprt_world_destroy(world);
  if (strcmp(fsdprt_status_string(FSDPRT_ERR_TIMEOUT), "timeout") != 0)
    ++failures;
  /* The thread's last error and the async error, from C. */
  fsdprt_clear_last_error();
  {
    fsdprt_status_t async_error = FSDPRT_OK;
    if (fsdprt_comm_get_async_error(NULL, &async_error) !=
            FSDPRT_ERR_INVALID_ARGUMENT ||
        fsdprt_get_last_error() != FSDPRT_ERR_INVALID_ARGUMENT ||
        strcmp(fsdprt_get_last_error_message(),
               "fsdprt_comm_get_async_error: invalid argument") != 0)
      ++failures;
  }
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("C API test passed\n");
  return 0;
}
