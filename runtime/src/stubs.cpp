// Entry points of backends that were not built into this library.
#include "fsdprt.h"

extern "C" {

#ifndef FSDPRT_WITH_MPI
fsdprt_status_t fsdprt_mpi_comm_create(int32_t, const int64_t *,
                                       const fsdprt_options_t *,
                                       fsdprt_comm_t **comm) {
  if (comm)
    *comm = nullptr;
  return FSDPRT_ERR_UNSUPPORTED;
}
#endif

#ifndef FSDPRT_WITH_NCCL
fsdprt_status_t fsdprt_nccl_get_unique_id(fsdprt_nccl_id_t *) {
  return FSDPRT_ERR_UNSUPPORTED;
}

fsdprt_status_t fsdprt_nccl_comm_create(int32_t, const int64_t *, int64_t,
                                        const fsdprt_nccl_id_t *, int32_t,
                                        const fsdprt_options_t *,
                                        fsdprt_comm_t **comm) {
  if (comm)
    *comm = nullptr;
  return FSDPRT_ERR_UNSUPPORTED;
}

fsdprt_status_t fsdprt_nccl_comm_set_stream(fsdprt_comm_t *, void *) {
  return FSDPRT_ERR_UNSUPPORTED;
}
#endif

} // extern "C"
