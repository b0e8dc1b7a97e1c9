//===- Device.h - the GPUs of a compute=gpu step's ranks ---------*- C++
//-*-===//
//
// A step lowered with compute=gpu (Program::gpu) keeps every buffer in
// device memory and enqueues its work on the rank's compute stream; its
// collectives need an nccl communicator. Each rank gets a GPU context
// current on its thread (rank r on GPU r mod count with the threads
// backend, the process's local rank mod count under MPI) and an nccl
// communicator as the step's comm; the runner's own exchanges stay on the
// host communicator. Arguments are uploaded into fsdprt_gpu_alloc buffers,
// the runner synchronizes the compute stream after the call, and downloads
// what it reports. See docs/GPU.md, "Running on GPUs".
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_DEVICE_H
#define FSDP_RUNNER_DEVICE_H

#include "Program.h"
#include "fsdp/Runner/Bytes.h"
#include "fsdprt.h"
#include "fsdprt_gpu.h"

#include "fsdp/Runner/Support.h"

#include <string>
#include <vector>

namespace fsdp::run::device {

/// Whether this process can run `prog` (a GPU step) at all: the runtime
/// has the GPU runtime, is emulated exactly when the step was compiled for
/// the emulation, and sees a usable GPU. Checked before compiling.
Error checkRunnable(const Program &prog);

/// The GPUs this process sees (after checkRunnable: at least one).
int32_t deviceCount();

/// A buffer of device memory the runner owns (row-major, from
/// fsdprt_gpu_alloc or a step's mgpuMemAlloc: both are freed alike).
struct Buffer {
  void *ptr = nullptr;
  int64_t bytes = 0;
};

/// One rank's GPU: its context (current on the calling thread) and its
/// nccl communicator, the step's comm. Destroyed on the same thread.
class RankDevice {
public:
  RankDevice() = default;
  RankDevice(const RankDevice &) = delete;
  RankDevice &operator=(const RankDevice &) = delete;
  ~RankDevice();

  /// Sets up rank `rank`'s GPU `device` in two phases, each agreed by
  /// every rank on `runner` (so that a rank that fails stops every rank
  /// before NCCL's collective initialization): the context, then the
  /// communicator of the mesh with `id`. `sharing`: more ranks than GPUs
  /// (several ranks on one GPU).
  bool open(const Program &prog, const fsdprt_options_t &options,
            fsdprt_comm_t *runner, int64_t rank, int32_t device,
            const fsdprt_nccl_id_t &id, bool sharing, std::string &error);

  fsdprt_comm_t *comm = nullptr;
  fsdprt_gpu_context_t *context = nullptr;
  int32_t device = -1;
};

/// A fresh NCCL unique id (the threads backend: made once per run).
Expected<fsdprt_nccl_id_t> uniqueId();

/// Rank 0's unique id, made there and sent to every rank over `runner`.
bool shareUniqueId(fsdprt_comm_t *runner, int64_t rank, fsdprt_nccl_id_t &id,
                   std::string &error);

/// This process's index among the processes of `runner` on the same host
/// (their host names gathered), for the MPI backend's device choice.
bool localRank(fsdprt_comm_t *runner, int64_t rank, int64_t &local,
               int64_t &onHost, std::string &error);

/// A device copy of `bytes` host bytes, or an empty buffer with `error`.
Buffer upload(const Bytes &bytes, const std::string &what, std::string &error);

/// The elements of the (device) memref descriptor `words` of `p`, row-major.
bool download(const Port &p, const int64_t *words, Bytes &out,
              std::string &error);

/// Frees a device buffer (stream-ordered after the work enqueued); a
/// pointer into the context's arena (a result planned there) is left alone.
void release(void *ptr);

/// Waits for every stream of the thread's context; false with the context's
/// first error in `error`.
bool synchronize(fsdprt_gpu_context_t *context, const std::string &what,
                 std::string &error);

} // namespace fsdp::run::device

#endif
