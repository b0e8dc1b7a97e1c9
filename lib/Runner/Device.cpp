//===- Device.cpp - the GPUs of a compute=gpu step's ranks ----------------===//

#include "Device.h"
#include "RankRun.h"
#include "Shards.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

namespace fsdp::run::device {

namespace {

Error error(const std::string &message) { return makeError(message); }

/// The file of the libfsdprt this process runs on, for messages.
std::string runtimeLibrary() {
  Dl_info info;
  if (dladdr(reinterpret_cast<const void *>(&fsdprt_gpu_built), &info) &&
      info.dli_fname)
    return info.dli_fname;
  return "libfsdprt";
}

} // namespace

Error checkRunnable(const Program &prog) {
  const GpuStep &gpu = *prog.gpu;
  std::string step = "'" + prog.entry + "' is a compute=gpu step";
  if (!fsdprt_gpu_built())
    return error(step + ", but " + runtimeLibrary() +
                 " was built without the GPU runtime (no CUDA toolkit when "
                 "it was built): rebuild it with the CUDA toolkit, or lower "
                 "the step with compute=fast");
  bool emulated = fsdprt_gpu_emulated() != 0;
  if (gpu.emulation && !emulated)
    return error(step +
                 " compiled with gpu-emulation=true (its kernels are "
                 "host functions), but " +
                 runtimeLibrary() +
                 " runs real GPUs: run it on the emulated runtime "
                 "(LD_LIBRARY_PATH=<build>/lib/cuda-emulation), or lower it "
                 "without gpu-emulation");
  if (!gpu.emulation && emulated)
    return error(step +
                 " compiled for real GPUs (its kernels are device "
                 "code), but " +
                 runtimeLibrary() +
                 " is the host emulation of CUDA: lower it with "
                 "gpu-emulation=true, or run it on the libfsdprt built over "
                 "CUDA");
  if (fsdprt_gpu_require_devices(1) != FSDPRT_OK)
    return error(step + ", but this machine cannot run it: " +
                 fsdprt_gpu_last_error_message());
  return Error::success();
}

int32_t deviceCount() {
  int32_t count = 0;
  if (fsdprt_gpu_device_count(&count) != FSDPRT_OK)
    return 0;
  return count;
}

RankDevice::~RankDevice() {
  // The thread may go on (the MPI backend's): it must not keep a freed comm.
  if (comm && fsdprt_get_thread_comm() == comm)
    fsdprt_set_thread_comm(nullptr);
  if (comm)
    fsdprt_comm_destroy(comm);
  if (context)
    fsdprt_gpu_context_destroy(context);
}

bool RankDevice::open(const Program &prog, const fsdprt_options_t &options,
                      fsdprt_comm_t *runner, int64_t rank, int32_t gpu,
                      const fsdprt_nccl_id_t &id, bool sharing,
                      std::string &err) {
  device = gpu;
  bool ok = fsdprt_gpu_context_create(gpu, &context) == FSDPRT_OK;
  if (!ok)
    err = "cannot use GPU " + std::to_string(gpu) + ": " +
          fsdprt_gpu_last_error_message();
  // NCCL's initialization waits for every rank: nobody starts it unless
  // every rank has its GPU.
  if (!agree(runner, ok, "setting up the GPUs", err))
    return false;
  fsdprt_status_t st = fsdprt_nccl_comm_create(int32_t(prog.meshShape.size()),
                                               prog.meshShape.data(), rank, &id,
                                               gpu, &options, &comm);
  ok = st == FSDPRT_OK;
  if (st == FSDPRT_ERR_UNSUPPORTED) {
    err = "this fsdprt was built without the nccl backend (NCCL was not "
          "found when it was built); the collectives of a compute=gpu step "
          "need it";
  } else if (!ok) {
    err = "cannot create the nccl communicator on GPU " + std::to_string(gpu) +
          ": " + fsdprt_gpu_last_error_message();
    if (sharing) {
      int32_t gpus = deviceCount();
      err += "; the ranks share GPUs here (" + std::to_string(gpus) +
             (gpus == 1 ? " GPU" : " GPUs") +
             "), which NCCL allows from version 2.30 on: run at most " +
             std::to_string(gpus) + (gpus == 1 ? " rank" : " ranks") +
             " (world size <= GPU count), or one process per GPU under "
             "mpirun";
    }
  }
  if (!agree(runner, ok, "creating the nccl communicators", err))
    return false;
  // Every collective of the first step is checked against its peers' (a
  // desync shows there); later steps run the same program, unchecked,
  // unless FSDPRT_NCCL_DESYNC_CHECKS says otherwise.
  if (options.check_desync && !std::getenv("FSDPRT_NCCL_DESYNC_CHECKS"))
    fsdprt_nccl_comm_set_desync_checks(comm, -1);
  return true;
}

Expected<fsdprt_nccl_id_t> uniqueId() {
  fsdprt_nccl_id_t id;
  fsdprt_status_t st = fsdprt_nccl_get_unique_id(&id);
  if (st == FSDPRT_ERR_UNSUPPORTED)
    return error("this fsdprt was built without the nccl backend (NCCL was "
                 "not found when it was built); the collectives of a "
                 "compute=gpu step need it");
  if (st != FSDPRT_OK)
    return error(std::string("cannot make the NCCL unique id: ") +
                 fsdprt_gpu_last_error_message());
  return id;
}

bool shareUniqueId(fsdprt_comm_t *runner, int64_t rank, fsdprt_nccl_id_t &id,
                   std::string &err) {
  // One flag byte, then the id: rank 0's is the one every rank uses.
  Bytes mine(1 + sizeof(id), 0);
  if (rank == 0) {
    auto made = uniqueId();
    if (made) {
      mine[0] = 1;
      std::memcpy(mine.data() + 1, &*made, sizeof(id));
    } else {
      err = toString(made.takeError());
    }
  }
  int64_t size = 1;
  fsdprt_comm_size(runner, &size);
  Bytes all(mine.size() * size_t(size));
  if (fsdprt_all_gather(runner, 1, mine.data(), all.data(), mine.size(),
                        FSDPRT_U8) != FSDPRT_OK) {
    err = std::string("sharing the NCCL unique id: ") +
          fsdprt_comm_error_message(runner);
    return false;
  }
  if (!all[0]) {
    if (err.empty())
      err = "rank 0 could not make the NCCL unique id";
    return false;
  }
  std::memcpy(&id, all.data() + 1, sizeof(id));
  return true;
}

bool localRank(fsdprt_comm_t *runner, int64_t rank, int64_t &local,
               int64_t &onHost, std::string &err) {
  constexpr size_t kName = 256;
  Bytes mine(kName, 0);
  gethostname(mine.data(), kName - 1);
  int64_t size = 1;
  fsdprt_comm_size(runner, &size);
  Bytes all(kName * size_t(size));
  if (fsdprt_all_gather(runner, 1, mine.data(), all.data(), kName, FSDPRT_U8) !=
      FSDPRT_OK) {
    err = std::string("gathering the host names: ") +
          fsdprt_comm_error_message(runner);
    return false;
  }
  local = onHost = 0;
  for (int64_t r = 0; r < size; ++r)
    if (std::memcmp(all.data() + r * kName, mine.data(), kName) == 0) {
      local += r < rank;
      ++onHost;
    }
  return true;
}

Buffer upload(const Bytes &bytes, const std::string &what, std::string &err) {
  Buffer b;
  b.bytes = int64_t(bytes.size());
  b.ptr = fsdprt_gpu_alloc(b.bytes);
  if (!b.ptr) {
    err = "cannot allocate " + std::to_string(b.bytes) + " bytes for " + what +
          ": " + fsdprt_gpu_last_error_message();
    return {};
  }
  if (!bytes.empty() &&
      fsdprt_gpu_copy_to_device(b.ptr, bytes.data(), b.bytes) != FSDPRT_OK) {
    err = "cannot upload " + what + ": " + fsdprt_gpu_last_error_message();
    fsdprt_gpu_free(b.ptr);
    return {};
  }
  return b;
}

namespace {

/// How many elements a copy of the span of descriptor `words` of `p`
/// reads (from its aligned pointer plus offset).
int64_t spanOf(const Port &p, const int64_t *words) {
  int64_t rank = p.rank();
  const int64_t *sizes = words + 3, *strides = words + 3 + rank;
  int64_t span = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (sizes[d] == 0)
      return 0;
    span += (sizes[d] - 1) * strides[d];
  }
  return span;
}

} // namespace

bool download(const Port &p, const int64_t *words, Bytes &out,
              std::string &err) {
  int64_t bytes = p.elementBytes;
  const char *aligned = reinterpret_cast<const char *>(words[1]);
  const char *first = aligned + words[2] * bytes;
  out.assign(size_t(p.slotBytes()), 0);
  if (isRowMajor(p, words)) {
    if (!out.empty() &&
        fsdprt_gpu_copy_to_host(out.data(), first, int64_t(out.size())) !=
            FSDPRT_OK) {
      err = "cannot download '" + p.name +
            "': " + fsdprt_gpu_last_error_message();
      return false;
    }
    return true;
  }
  // A strided view: its span to the host, then the host's strided copy.
  Bytes host(size_t(spanOf(p, words) * bytes));
  if (!host.empty() &&
      fsdprt_gpu_copy_to_host(host.data(), first, int64_t(host.size())) !=
          FSDPRT_OK) {
    err =
        "cannot download '" + p.name + "': " + fsdprt_gpu_last_error_message();
    return false;
  }
  std::vector<int64_t> local(words, words + p.descriptorWords());
  local[0] = local[1] = reinterpret_cast<int64_t>(host.data());
  local[2] = 0;
  out = copyResult(p, local.data());
  return true;
}

void release(void *ptr) { fsdprt_gpu_free(ptr); }

bool synchronize(fsdprt_gpu_context_t *context, const std::string &what,
                 std::string &err) {
  if (fsdprt_gpu_synchronize(context) == FSDPRT_OK)
    return true;
  err = what + ": " + fsdprt_gpu_context_error_message(context);
  return false;
}

} // namespace fsdp::run::device
