/*
 * fsdprt.h - C API of the fsdp-opt collective runtime.
 *
 * A communicator covers a device mesh (named axes with static sizes, ranks
 * numbered row-major, last axis fastest). Every collective runs over the
 * group selected by a bitmask of mesh axes: bit i selects mesh axis i (axis 0
 * is the outermost). The group of a rank is the set of ranks whose
 * coordinates equal its own on every axis outside the mask; the index of a
 * rank inside its group is its row-major index over the masked axes.
 *
 * Backends: "threads" (ranks are threads of one process), "mpi" (one process
 * per rank under mpirun) and "nccl" (one process per GPU). See
 * docs/RUNTIME.md for the full reference.
 *
 * The enum values below are part of the ABI: compiled code passes them as
 * plain integers.
 */
#ifndef FSDPRT_H
#define FSDPRT_H

#include <stddef.h>
#include <stdint.h>

#include "fsdprt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FSDPRT_API __attribute__((visibility("default")))
#else
#define FSDPRT_API
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/* fsdprt_status_t, the one status type of the runtime and the quantization
 * library, is defined in fsdprt_types.h. */

/* Static description of a status code ("ok", "desync", ...). Never NULL. */
FSDPRT_API const char *fsdprt_status_string(fsdprt_status_t status);

/* The version of the interface compiled code calls (the fsdprt_jit_* entry
 * points, the thread comm, the status codes). A step compiled ahead of time
 * records the version it was built against; a runner refuses to load it
 * into a runtime of another version. Raise it whenever an entry point that
 * compiled code calls changes its signature or meaning. */
#define FSDPRT_ABI_VERSION 1
FSDPRT_API int32_t fsdprt_abi_version(void);

/* An unranked memref as MLIR's C interface passes it: the rank and a
 * pointer to the ranked descriptor (base, data, offset, sizes[rank],
 * strides[rank], in 64-bit words). */
typedef struct fsdprt_unranked_memref {
  int64_t rank;
  void *descriptor;
} fsdprt_unranked_memref_t;

/* Copies every element of `src` into `dst` (same shape, any strides):
 * upstream's memrefCopy, which a step compiled ahead of time calls instead
 * of MLIR's C runner utils. */
FSDPRT_API void fsdprt_memref_copy(int64_t element_bytes,
                                   const fsdprt_unranked_memref_t *src,
                                   const fsdprt_unranked_memref_t *dst);

/* ------------------------------------------------------------------------ */
/* Element types and reduction operators (stable integer values)            */
/* ------------------------------------------------------------------------ */

/* fsdprt_dtype_t and fsdprt_reduce_op_t: fsdprt_types.h. */

/* Size in bytes of one element, or 0 for an unknown dtype. */
FSDPRT_API size_t fsdprt_dtype_size(int32_t dtype);
/* Short name: "f32", "bf16", ... ("?" for unknown values). */
FSDPRT_API const char *fsdprt_dtype_name(int32_t dtype);
/* "sum", "avg", "max", "min" ("?" for unknown values). */
FSDPRT_API const char *fsdprt_reduce_op_name(int32_t op);

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

#define FSDPRT_MAX_MESH_DIMS 8

typedef struct fsdprt_options {
  /* Seconds a rank waits for the other ranks of a group before the
   * collective fails with FSDPRT_ERR_TIMEOUT. <= 0 waits forever.
   * fsdprt_options_init() sets it from FSDPRT_TIMEOUT_S or to 60. */
  double timeout_s;
  /* Non-zero: exchange and compare a descriptor per collective (always on
   * for the threads and mpi backends, where it is cheap; optional for nccl
   * where it costs a small device round trip). Env FSDPRT_CHECK_DESYNC. */
  int32_t check_desync;
  /* Optional names of the mesh axes (ndims entries) used in messages; NULL
   * gives "axis0", "axis1", ... The strings are copied. */
  const char *const *axis_names;
} fsdprt_options_t;

/* Fills defaults (reads FSDPRT_TIMEOUT_S and FSDPRT_CHECK_DESYNC). Passing a
 * NULL options pointer to a create function is the same as these defaults. */
FSDPRT_API void fsdprt_options_init(fsdprt_options_t *options);

/* ------------------------------------------------------------------------ */
/* Communicators                                                             */
/* ------------------------------------------------------------------------ */

typedef struct fsdprt_world fsdprt_world_t;
typedef struct fsdprt_comm fsdprt_comm_t;
typedef struct fsdprt_request *fsdprt_request_t;

typedef enum fsdprt_backend {
  FSDPRT_BACKEND_THREADS = 0,
  FSDPRT_BACKEND_MPI = 1,
  FSDPRT_BACKEND_NCCL = 2
} fsdprt_backend_t;

/* threads backend: one process, size(shape) ranks that are threads. The
 * world owns one communicator per rank; each must be used by one thread at a
 * time (normally the thread that plays that rank). */
FSDPRT_API fsdprt_status_t fsdprt_threads_world_create(
    int32_t ndims, const int64_t *shape, const fsdprt_options_t *options,
    fsdprt_world_t **world);
/* The communicator of `rank` (owned by the world, same pointer every call). */
FSDPRT_API fsdprt_status_t fsdprt_threads_comm(fsdprt_world_t *world,
                                               int64_t rank,
                                               fsdprt_comm_t **comm);
/* Marks the world failed: every pending and future collective of every rank
 * returns FSDPRT_ERR_ABORTED with `reason` in its message. */
FSDPRT_API void fsdprt_world_abort(fsdprt_world_t *world, const char *reason);
/* Destroys the world and its communicators. No rank may be inside a call. */
FSDPRT_API void fsdprt_world_destroy(fsdprt_world_t *world);

/* mpi backend: collective over MPI_COMM_WORLD, whose size must equal the mesh
 * size. Initializes MPI (MPI_THREAD_SERIALIZED) when the caller has not;
 * then MPI is finalized at process exit. Returns FSDPRT_ERR_UNSUPPORTED when
 * the library was built without MPI. */
FSDPRT_API fsdprt_status_t
fsdprt_mpi_comm_create(int32_t ndims, const int64_t *shape,
                       const fsdprt_options_t *options, fsdprt_comm_t **comm);

/* nccl backend: one process (or thread) per GPU. Rank 0 creates the unique
 * id and distributes it out of band (file, MPI, ...); every rank then calls
 * fsdprt_nccl_comm_create with the same id. Buffers passed to collectives
 * are device pointers. Returns FSDPRT_ERR_UNSUPPORTED when the library was
 * built without CUDA/NCCL, FSDPRT_ERR_BACKEND when no GPU is usable. */
typedef struct fsdprt_nccl_id {
  char bytes[128];
} fsdprt_nccl_id_t;
FSDPRT_API fsdprt_status_t fsdprt_nccl_get_unique_id(fsdprt_nccl_id_t *id);
FSDPRT_API fsdprt_status_t
fsdprt_nccl_comm_create(int32_t ndims, const int64_t *shape, int64_t rank,
                        const fsdprt_nccl_id_t *id, int32_t cuda_device,
                        const fsdprt_options_t *options, fsdprt_comm_t **comm);
/* Collectives of this comm are enqueued on `cuda_stream` (a cudaStream_t;
 * NULL selects the comm's own stream). */
FSDPRT_API fsdprt_status_t fsdprt_nccl_comm_set_stream(fsdprt_comm_t *comm,
                                                       void *cuda_stream);
/* With check_desync on, the nccl backend compares descriptors on the first
 * FSDPRT_NCCL_DESYNC_CHECKS (default 64) collectives of each group; this sets
 * how many more each group checks (0: none, e.g. after the first step; -1:
 * every collective). */
FSDPRT_API fsdprt_status_t
fsdprt_nccl_comm_set_desync_checks(fsdprt_comm_t *comm, int64_t collectives);

/* Destroys an mpi or nccl communicator (collective for those backends).
 * Threads-backend communicators belong to their world: INVALID_ARGUMENT. */
FSDPRT_API fsdprt_status_t fsdprt_comm_destroy(fsdprt_comm_t *comm);

/* Queries (return FSDPRT_ERR_INVALID_ARGUMENT on NULL or out-of-range). */
FSDPRT_API fsdprt_status_t fsdprt_comm_backend(const fsdprt_comm_t *comm,
                                               fsdprt_backend_t *backend);
FSDPRT_API fsdprt_status_t fsdprt_comm_rank(const fsdprt_comm_t *comm,
                                            int64_t *rank);
FSDPRT_API fsdprt_status_t fsdprt_comm_size(const fsdprt_comm_t *comm,
                                            int64_t *size);
FSDPRT_API fsdprt_status_t fsdprt_comm_ndims(const fsdprt_comm_t *comm,
                                             int32_t *ndims);
/* shape and coords have ndims entries. */
FSDPRT_API fsdprt_status_t fsdprt_comm_shape(const fsdprt_comm_t *comm,
                                             int64_t *shape);
FSDPRT_API fsdprt_status_t fsdprt_comm_coords(const fsdprt_comm_t *comm,
                                              int64_t *coords);
/* Size of the group selected by `group_mask` and this rank's index in it. */
FSDPRT_API fsdprt_status_t fsdprt_comm_group(const fsdprt_comm_t *comm,
                                             int64_t group_mask,
                                             int64_t *group_size,
                                             int64_t *group_rank);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* First error recorded on the comm (sticky), FSDPRT_OK when none. Every
 * failing call on the comm and every failing jit entry point records it. */
FSDPRT_API fsdprt_status_t fsdprt_comm_error(const fsdprt_comm_t *comm);
/* Message of the first error ("" when none). The returned string is a
 * thread-local copy, valid until the next message call on this thread. */
FSDPRT_API const char *fsdprt_comm_error_message(const fsdprt_comm_t *comm);
/* Message of the most recent failing call on the comm ("" when none);
 * thread-local copy as above. */
FSDPRT_API const char *
fsdprt_comm_last_error_message(const fsdprt_comm_t *comm);

/* Records an error on the comm as if a call had failed (first error sticky,
 * last message updated); for entry points built on top of this API, e.g.
 * the quantized all-gather. Does not abort the world. NULL message: the
 * status string. */
FSDPRT_API fsdprt_status_t fsdprt_comm_record_error(fsdprt_comm_t *comm,
                                                    fsdprt_status_t status,
                                                    const char *message);

/* The comm's asynchronous error (as ncclCommGetAsyncError): FSDPRT_OK, or the
 * status of an error that reached the comm outside the caller's own calls:
 * the world aborted by another rank or by fsdprt_world_abort (threads), an
 * abort the rank has seen (mpi: another process's abort notice is read
 * while the rank is inside a runtime call), the watchdog's timeout or an
 * asynchronous NCCL error (nccl). Such an error fails every later
 * collective of the comm; the message is fsdprt_comm_error_message or the
 * next failing call's. Callable from any thread (e.g. a monitor). */
FSDPRT_API fsdprt_status_t fsdprt_comm_get_async_error(
    const fsdprt_comm_t *comm, fsdprt_status_t *async_error);

/* The thread's last error: the status and message of the last failure seen
 * on the calling thread (a C API call that failed, an error recorded on a
 * comm, a GPU context or the process, including by the entry points
 * compiled code calls). Successful calls leave it as it is; clear it with
 * fsdprt_clear_last_error. FSDPRT_OK and "" when none. The message is valid
 * until the thread's next failing call. The quantization library keeps its
 * own (fsdprt_quant_last_error), with the same status type. */
FSDPRT_API fsdprt_status_t fsdprt_get_last_error(void);
FSDPRT_API const char *fsdprt_get_last_error_message(void);
FSDPRT_API void fsdprt_clear_last_error(void);

/* Process-level error: jit entry points called with no thread comm set. */
FSDPRT_API fsdprt_status_t fsdprt_process_error(void);
FSDPRT_API const char *fsdprt_process_error_message(void);
FSDPRT_API void fsdprt_process_error_clear(void);

/* ------------------------------------------------------------------------ */
/* Collectives (NCCL semantics, contiguous buffers, counts in elements)     */
/* ------------------------------------------------------------------------ */

/* Group of k ranks. recv holds k*send_count elements, group rank j's data at
 * offset j*send_count. In place when send == recv + group_rank*send_count. */
FSDPRT_API fsdprt_status_t fsdprt_all_gather(fsdprt_comm_t *comm,
                                             int64_t group_mask,
                                             const void *send, void *recv,
                                             int64_t send_count, int32_t dtype);
/* send holds k*recv_count elements; group rank j receives op over the
 * group's slot j. In place when recv == send + group_rank*recv_count. */
FSDPRT_API fsdprt_status_t fsdprt_reduce_scatter(fsdprt_comm_t *comm,
                                                 int64_t group_mask,
                                                 const void *send, void *recv,
                                                 int64_t recv_count,
                                                 int32_t dtype, int32_t op);
/* send == recv is allowed (in place). */
FSDPRT_API fsdprt_status_t fsdprt_all_reduce(fsdprt_comm_t *comm,
                                             int64_t group_mask,
                                             const void *send, void *recv,
                                             int64_t count, int32_t dtype,
                                             int32_t op);

/* Asynchronous forms: the buffers must stay untouched until the request
 * completes. *request is set to a new request (NULL on immediate failure). */
FSDPRT_API fsdprt_status_t fsdprt_all_gather_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t send_count, int32_t dtype, fsdprt_request_t *request);
FSDPRT_API fsdprt_status_t fsdprt_reduce_scatter_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t recv_count, int32_t dtype, int32_t op, fsdprt_request_t *request);
FSDPRT_API fsdprt_status_t fsdprt_all_reduce_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t count, int32_t dtype, int32_t op, fsdprt_request_t *request);

/* Member layouts: a bucket of n_members tensors moved by one collective,
 * each of whose gathered (or reduced) tensors is contiguous.
 *
 * Member i contributes c_i = member_counts[i] >= 0 elements per rank;
 * off_i = c_0 + ... + c_{i-1}; the per-rank count is S = sum c_i (the
 * count argument); k is the group size.
 *
 * all_gather: send holds this rank's S elements, member i at off_i. recv
 * (k*S elements) holds member after member: member i's block starts at
 * k*off_i, and group rank j's piece of it, at k*off_i + j*c_i, is
 * send_j[off_i : off_i + c_i]. Member i's gathered tensor is the c_i * k
 * elements of its block.
 *
 * reduce_scatter: send (k*S elements) holds member after member: member i's
 * block starts at k*off_i and its slot for group rank j at k*off_i + j*c_i
 * (c_i elements). recv (S elements): recv[off_i + t] = op over the group of
 * element t of slot (this rank's group rank) of member i's block.
 *
 * n_members == 0 (member_counts may then be NULL) and n_members == 1 are
 * the plain collectives. With n_members > 1, send and recv must not overlap.
 * INVALID_ARGUMENT: n_members < 0, member_counts NULL with n_members > 0, a
 * negative c_i, or counts that do not add up to the count. Ranks that pass
 * different layouts fail with FSDPRT_ERR_DESYNC. member_counts must stay
 * valid until the collective completes. Results are bit-identical to the
 * plain collective on the rank-major buffers followed by the permutation.
 * The threads backend moves the pieces directly; the mpi backend runs the
 * plain collective on a scratch buffer and permutes it (at the start for
 * reduce_scatter, at completion for all_gather); the nccl backend returns
 * FSDPRT_ERR_UNSUPPORTED (the permutation would run on the host). The
 * statistics count the bytes of the plain collective. */
FSDPRT_API fsdprt_status_t fsdprt_all_gather_members(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t send_count, int32_t dtype, int64_t n_members,
    const int64_t *member_counts);
FSDPRT_API fsdprt_status_t fsdprt_reduce_scatter_members(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t recv_count, int32_t dtype, int32_t op, int64_t n_members,
    const int64_t *member_counts);
FSDPRT_API fsdprt_status_t fsdprt_all_gather_members_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t send_count, int32_t dtype, int64_t n_members,
    const int64_t *member_counts, fsdprt_request_t *request);
FSDPRT_API fsdprt_status_t fsdprt_reduce_scatter_members_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t recv_count, int32_t dtype, int32_t op, int64_t n_members,
    const int64_t *member_counts, fsdprt_request_t *request);

/* Blocks until the request completes, frees it and sets *request to NULL.
 * Returns the status of the collective. Waiting on NULL is a no-op (OK). */
FSDPRT_API fsdprt_status_t fsdprt_wait(fsdprt_request_t *request);
/* Sets *done to 1 and behaves like fsdprt_wait when the request has
 * completed; otherwise sets *done to 0, makes progress and returns OK. */
FSDPRT_API fsdprt_status_t fsdprt_test(fsdprt_request_t *request, int *done);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

typedef enum fsdprt_collective_kind {
  FSDPRT_KIND_ALL_GATHER = 0,
  FSDPRT_KIND_REDUCE_SCATTER = 1,
  FSDPRT_KIND_ALL_REDUCE = 2
} fsdprt_collective_kind_t;

#define FSDPRT_NUM_KINDS 3

/* Per rank, per kind (indexed by fsdprt_collective_kind_t): started
 * collectives, bytes of their send buffers and bytes of their receive
 * buffers (all_gather: m and k*m elements; reduce_scatter: k*m and m;
 * all_reduce: count and count). Failed argument checks are not counted.
 *
 * exposed_ns: the communication the rank's compute waited for, in
 * nanoseconds. On the threads and mpi backends the thread that computes is
 * the one that communicates: the time inside synchronous collectives, starts
 * and waits. On nccl the time the compute stream stood still in waits for a
 * collective's completion (an event timed on each side of the wait, read
 * when the stream has passed it: get the stats after synchronizing). */
typedef struct fsdprt_stats {
  uint64_t calls[FSDPRT_NUM_KINDS];
  uint64_t bytes_sent[FSDPRT_NUM_KINDS];
  uint64_t bytes_received[FSDPRT_NUM_KINDS];
  uint64_t total_calls;
  uint64_t total_bytes_sent;
  uint64_t total_bytes_received;
  uint64_t exposed_ns;
} fsdprt_stats_t;

FSDPRT_API fsdprt_status_t fsdprt_comm_get_stats(const fsdprt_comm_t *comm,
                                                 fsdprt_stats_t *stats);
FSDPRT_API fsdprt_status_t fsdprt_comm_reset_stats(fsdprt_comm_t *comm);

/* ------------------------------------------------------------------------ */
/* Entry points for compiled code                                           */
/* ------------------------------------------------------------------------ */
/*
 * Lowered programs call these with plain C types. The calling thread's comm
 * is set first with fsdprt_set_thread_comm. They return nothing: the first
 * error is recorded on the thread's comm (fsdprt_comm_error) and every later
 * jit call on that comm does nothing (waits still release their handles), so
 * the program runs to completion and its runner reports the error. With no
 * thread comm the error is recorded at process level (fsdprt_process_error).
 * Handles are > 0; 0 is returned after an error and waiting on 0 is a no-op.
 */
FSDPRT_API void fsdprt_set_thread_comm(fsdprt_comm_t *comm);
FSDPRT_API fsdprt_comm_t *fsdprt_get_thread_comm(void);

FSDPRT_API void fsdprt_jit_all_gather(void *send, void *recv,
                                      int64_t send_count, int32_t dtype,
                                      int64_t group_mask);
FSDPRT_API void fsdprt_jit_reduce_scatter(void *send, void *recv,
                                          int64_t recv_count, int32_t dtype,
                                          int32_t op, int64_t group_mask);
FSDPRT_API void fsdprt_jit_all_reduce(void *send, void *recv, int64_t count,
                                      int32_t dtype, int32_t op,
                                      int64_t group_mask);
FSDPRT_API int64_t fsdprt_jit_all_gather_start(void *send, void *recv,
                                               int64_t send_count,
                                               int32_t dtype,
                                               int64_t group_mask);
FSDPRT_API int64_t fsdprt_jit_reduce_scatter_start(void *send, void *recv,
                                                   int64_t recv_count,
                                                   int32_t dtype, int32_t op,
                                                   int64_t group_mask);
FSDPRT_API int64_t fsdprt_jit_all_reduce_start(void *send, void *recv,
                                               int64_t count, int32_t dtype,
                                               int32_t op, int64_t group_mask);
FSDPRT_API void fsdprt_jit_wait(int64_t handle);

/* The member layouts (fsdprt_all_gather_members): the same arguments as
 * the plain entry points plus the number of members and their counts (a
 * constant array of the program). */
FSDPRT_API void fsdprt_jit_all_gather_members(void *send, void *recv,
                                              int64_t send_count, int32_t dtype,
                                              int64_t group_mask,
                                              int64_t n_members,
                                              const int64_t *member_counts);
FSDPRT_API int64_t fsdprt_jit_all_gather_members_start(
    void *send, void *recv, int64_t send_count, int32_t dtype,
    int64_t group_mask, int64_t n_members, const int64_t *member_counts);
FSDPRT_API void fsdprt_jit_reduce_scatter_members(
    void *send, void *recv, int64_t recv_count, int32_t dtype, int32_t op,
    int64_t group_mask, int64_t n_members, const int64_t *member_counts);
FSDPRT_API int64_t fsdprt_jit_reduce_scatter_members_start(
    void *send, void *recv, int64_t recv_count, int32_t dtype, int32_t op,
    int64_t group_mask, int64_t n_members, const int64_t *member_counts);

/* Outstanding jit handles of the thread's comm (0 after every start has
 * been waited on); lets a runner check that a program waited on all. */
FSDPRT_API int64_t fsdprt_jit_pending(fsdprt_comm_t *comm);

/* ------------------------------------------------------------------------ */
/* Quantized all-gather for compiled code                                   */
/* ------------------------------------------------------------------------ */
/*
 * fsdp.buffer.quantized_all_gather (docs/QUANTIZATION.md). `send` holds this
 * rank's `count` elements (dtype FSDPRT_F32 or FSDPRT_BF16), viewed as the
 * row-major matrix [rows, cols] (rows * cols == count); `format` is a
 * fsdprt_quant_format (fsdprt_quant.h). Every rank quantizes its shard
 * (per-tensor FP8 and NVFP4 first all-reduce the amax with max over the
 * group, so all ranks use one scale), the packed bytes [data | scales |
 * per-tensor fp32] are all-gathered as FSDPRT_U8, and recv (k * count
 * elements) receives every group rank's dequantized shard at offset
 * j * count. Host buffers only (threads and mpi backends). Errors are
 * recorded like those of the other jit entry points; the statistics count
 * the amax all-reduce and the U8 all-gather.
 */
FSDPRT_API void fsdprt_jit_quantized_all_gather(void *send, void *recv,
                                                int64_t count, int32_t dtype,
                                                int32_t format, int64_t rows,
                                                int64_t cols,
                                                int64_t group_mask);

/*
 * The same gather in local steps, so that the compiler can move the bytes
 * with a plain (bucketed, started-early) FSDPRT_U8 all-gather in between
 * (fsdp.buffer.quant_amax / quantize / dequantize). Results are bit-identical
 * to fsdprt_jit_quantized_all_gather's.
 *
 * fsdprt_jit_quant_amax: *amax = max |x| over `count` elements (NaN
 * propagates), the value the per-tensor formats and NVFP4 all-reduce (max).
 * fsdprt_jit_quantize: this rank's packet [data | scales | per-tensor fp32]
 * (fsdprt_quant_wire_bytes of [rows, cols]) into `packet`; `amax` points to
 * the group's amax for the formats that use it, else is ignored (may be
 * NULL). fsdprt_jit_dequantize: `k` gathered packets into k * rows * cols
 * elements, slot after slot. No communication; errors are recorded like
 * those of the other jit entry points.
 */
FSDPRT_API void fsdprt_jit_quant_amax(const void *x, void *amax, int64_t count,
                                      int32_t dtype);
FSDPRT_API void fsdprt_jit_quantize(const void *x, const void *amax,
                                    void *packet, int64_t count, int32_t dtype,
                                    int32_t format, int64_t rows, int64_t cols);
FSDPRT_API void fsdprt_jit_dequantize(const void *packets, void *y, int64_t k,
                                      int32_t dtype, int32_t format,
                                      int64_t rows, int64_t cols);

/* ------------------------------------------------------------------------ */
/* Arenas: the planned buffers of a compiled step                           */
/* ------------------------------------------------------------------------ */
/*
 * fsdp-assign-buffers gives every step-local buffer of static size an offset
 * in one block per rank (docs/RUNTIME.md, "Static memory"). The comm holds
 * that block: allocated once, on the thread that calls first (its pages
 * touched there, so they are that thread's and no later step faults them
 * in), grown only when a larger plan asks, and released with the comm. A
 * device backend can implement the same calls with one device allocation.
 *
 * fsdprt_arena_reserve: makes the comm's arena at least `bytes` bytes
 * (FSDPRT_ERR_OUT_OF_MEMORY, recorded on the comm, when it cannot; nothing
 * changes then). A runner reserves before the first step so that a failure
 * is reported before any collective starts. fsdprt_arena_bytes: its size (0
 * before any reservation).
 */
FSDPRT_API fsdprt_status_t fsdprt_arena_reserve(fsdprt_comm_t *comm,
                                                int64_t bytes);
FSDPRT_API int64_t fsdprt_arena_bytes(const fsdprt_comm_t *comm);

/*
 * For compiled code. fsdprt_jit_arena: the base of the calling thread's
 * comm's arena, reserved to `bytes` first if smaller (64-byte aligned, page
 * aligned in practice). A reservation that fails there cannot be returned
 * to the step: the message names the rank and size and the process aborts.
 * fsdprt_jit_arena_unpoison / _poison mark a planned buffer live / dead: in
 * AddressSanitizer builds the arena starts poisoned and only live buffers
 * are addressable, so an overrun into a gap or a dead neighbour is
 * reported; in other builds they do nothing.
 */
FSDPRT_API void *fsdprt_jit_arena(int64_t bytes);
FSDPRT_API void fsdprt_jit_arena_unpoison(void *ptr, int64_t bytes);
FSDPRT_API void fsdprt_jit_arena_poison(void *ptr, int64_t bytes);

/*
 * For compiled code: a run-time check of the step (a `cf.assert` of the
 * step, e.g. the PyTorch frontend's guard that a value the forward read
 * from a tensor is the one the step was specialized on). `ok` != 0: nothing
 * happens. Otherwise `message` (a NUL-terminated string) is recorded on the
 * calling thread's comm as FSDPRT_ERR_INVALID_ARGUMENT, prefixed with the
 * rank, the world is aborted so that no peer waits for this rank in a
 * collective, and the step runs to its end with its later calls doing
 * nothing; the runner reports the message. A second failed check on the
 * same comm keeps the first message.
 */
FSDPRT_API void fsdprt_jit_guard(int32_t ok, const char *message);

/* The indices torch.topk picks on the CPU, ties and NaN included (aten's
 * algorithm: std::partial_sort when k * 64 <= n, else std::nth_element and,
 * when `sorted`, std::sort of the first k - 1; values compared only, NaN
 * above every number). `x` holds `rows` contiguous rows of `n` elements of
 * `dtype` (FSDPRT_F32, F64, BF16, F16, I32 or I64); row r's k indices go to
 * indices[r * k ... r * k + k - 1], the largest (smallest) first. k > n or an
 * unsupported dtype fails the step as fsdprt_jit_guard does. */
FSDPRT_API void fsdprt_jit_topk_indices(const void *x, int32_t dtype,
                                        int64_t rows, int64_t n, int64_t k,
                                        int32_t largest, int32_t sorted,
                                        int64_t *indices);

/* The indices torch.sort(stable=False) gives on the CPU, ties and NaN
 * included (aten's algorithm: std::sort of each row's (value, position)
 * pairs, values compared only, NaN above every number). `x` holds `rows`
 * contiguous rows of `n` elements of `dtype` (as fsdprt_jit_topk_indices);
 * row r's n indices go to indices[r * n ... r * n + n - 1], ascending (the
 * largest first with `descending`). An unsupported dtype fails the step as
 * fsdprt_jit_guard does. */
FSDPRT_API void fsdprt_jit_sort_indices(const void *x, int32_t dtype,
                                        int64_t rows, int64_t n,
                                        int32_t descending, int64_t *indices);

/*
 * For compiled code: the calling rank's index in its group over the axes of
 * `group_mask` (its coordinate on the axis for a single axis; the same
 * numbering as the collectives' blocks), read locally from the mesh with no
 * communication. An invalid mask is recorded on the thread's comm like a
 * failed collective's arguments, and 0 is returned.
 */
FSDPRT_API int64_t fsdprt_jit_axis_index(int64_t group_mask);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDPRT_H */
