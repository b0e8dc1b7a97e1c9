// nccl backend: one process (or thread) per GPU; buffers are device
// pointers and collectives run on a CUDA stream.
//
// One NCCL communicator per group mask is split from the world
// communicator at creation (ncclCommSplit is collective over the world).
// With desync checking on, every collective first all-gathers its
// descriptor over the group and compares it on the host before the data
// moves; this costs one small collective and a stream synchronization.
// Reductions use NCCL's own algorithms (not the CPU backends' rank order).
#include "common.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <sched.h>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the nccl backend needs NCCL >= 2.18 (ncclCommSplit)"
#endif

static_assert(sizeof(ncclUniqueId) <= sizeof(fsdprt_nccl_id_t),
              "fsdprt_nccl_id_t must hold an ncclUniqueId");

namespace fsdprt {
namespace {

bool nccl_dtype(int32_t dtype, ncclDataType_t *out) {
  switch (dtype) {
  case FSDPRT_F32:
    *out = ncclFloat32;
    return true;
  case FSDPRT_F64:
    *out = ncclFloat64;
    return true;
  case FSDPRT_F16:
    *out = ncclFloat16;
    return true;
  case FSDPRT_BF16:
    *out = ncclBfloat16;
    return true;
  case FSDPRT_I32:
    *out = ncclInt32;
    return true;
  case FSDPRT_I64:
    *out = ncclInt64;
    return true;
  case FSDPRT_U8:
    *out = ncclUint8;
    return true;
  case FSDPRT_I8:
    *out = ncclInt8;
    return true;
  }
  return false;
}

ncclRedOp_t nccl_op(int32_t op) {
  switch (op) {
  case FSDPRT_AVG:
    return ncclAvg;
  case FSDPRT_MAX:
    return ncclMax;
  case FSDPRT_MIN:
    return ncclMin;
  default:
    return ncclSum;
  }
}

struct Group {
  ncclComm_t comm = nullptr; // null for groups of one
  int k = 1;
  int member = 0;
  std::vector<int64_t> ranks;
  std::string name;    // "{axes: shard}"
  std::string members; // "group ranks 0,1,2,3"
  uint64_t next_seq = 0;
};

struct NcclRequest : fsdprt_request {
  cudaEvent_t event = nullptr;
  Desc desc;
  Group *group = nullptr;
  uint64_t seq = 0;
  bool done = false;
  Status result;
  ~NcclRequest() override {
    if (event)
      cudaEventDestroy(event);
  }
};

class NcclComm : public fsdprt_comm {
public:
  ~NcclComm() override;
  Status init(const ncclUniqueId &id, int device);

  Status start(const Desc &desc, const void *send, void *recv,
               fsdprt_request **request) override;
  Status wait(fsdprt_request *request) override;
  Status test(fsdprt_request *request, bool *done) override;
  void abort(const Status &cause) override;

  void set_stream(cudaStream_t s) { stream_ = s ? s : own_stream_; }

private:
  Status cuda(cudaError_t rc, const char *what);
  Status nccl(ncclResult_t rc, const char *what);
  // Waits for `event` with the timeout; checks NCCL's asynchronous errors.
  Status sync_event(cudaEvent_t event, const Group &g, uint64_t seq,
                    const Desc &d);
  Status check_descriptors(Group &g, uint64_t seq, const Desc &d);

  int device_ = 0;
  ncclComm_t world_ = nullptr;
  std::vector<Group> groups_;
  cudaStream_t own_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;
  Desc *desc_device_ = nullptr; // k descriptors, all-gathered per check
  Desc *desc_host_ = nullptr;   // pinned copy
  cudaEvent_t desc_event_ = nullptr;
  bool aborted_ = false;
  Status abort_cause_;
};

Status NcclComm::cuda(cudaError_t rc, const char *what) {
  if (rc == cudaSuccess)
    return Status::Ok();
  return Status(FSDPRT_ERR_BACKEND,
                format("rank %lld: %s failed: %s", (long long)rank, what,
                       cudaGetErrorString(rc)));
}

Status NcclComm::nccl(ncclResult_t rc, const char *what) {
  if (rc == ncclSuccess)
    return Status::Ok();
  return Status(FSDPRT_ERR_BACKEND,
                format("rank %lld: %s failed: %s", (long long)rank, what,
                       ncclGetErrorString(rc)));
}

Status NcclComm::init(const ncclUniqueId &id, int device) {
  device_ = device;
  Status st = cuda(cudaSetDevice(device), "cudaSetDevice");
  if (!st.ok())
    return st;
  st = nccl(ncclCommInitRank(&world_, int(mesh.size), id, int(rank)),
            "ncclCommInitRank");
  if (!st.ok())
    return st;
  groups_.resize(size_t(mesh.num_masks()));
  int64_t max_k = 1;
  for (int64_t mask = 0; mask < mesh.num_masks(); ++mask) {
    Group &g = groups_[size_t(mask)];
    int64_t gr = 0, gid = 0;
    mesh.group(rank, mask, &g.ranks, &gr, &gid);
    g.k = int(g.ranks.size());
    g.member = int(gr);
    g.name = mesh.group_axes(mask);
    g.members = "group ranks " + join_ranks(g.ranks);
    max_k = std::max<int64_t>(max_k, g.k);
    // Every rank takes part in every split (NCCL_SPLIT_NOCOLOR never
    // applies: each rank belongs to exactly one group per mask).
    st = nccl(ncclCommSplit(world_, int(gid), int(gr), &g.comm, nullptr),
              "ncclCommSplit");
    if (!st.ok())
      return st;
  }
  st = cuda(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking),
            "cudaStreamCreate");
  if (!st.ok())
    return st;
  stream_ = own_stream_;
  st = cuda(cudaMalloc(reinterpret_cast<void **>(&desc_device_),
                       size_t(max_k) * sizeof(Desc)),
            "cudaMalloc");
  if (!st.ok())
    return st;
  st = cuda(cudaMallocHost(reinterpret_cast<void **>(&desc_host_),
                           size_t(max_k) * sizeof(Desc)),
            "cudaMallocHost");
  if (!st.ok())
    return st;
  return cuda(cudaEventCreateWithFlags(&desc_event_, cudaEventDisableTiming),
              "cudaEventCreate");
}

NcclComm::~NcclComm() {
  cudaSetDevice(device_);
  for (Group &g : groups_) {
    if (!g.comm)
      continue;
    if (aborted_)
      ncclCommAbort(g.comm);
    else
      ncclCommDestroy(g.comm);
  }
  if (world_) {
    if (aborted_)
      ncclCommAbort(world_);
    else
      ncclCommDestroy(world_);
  }
  if (desc_event_)
    cudaEventDestroy(desc_event_);
  if (desc_device_)
    cudaFree(desc_device_);
  if (desc_host_)
    cudaFreeHost(desc_host_);
  if (own_stream_)
    cudaStreamDestroy(own_stream_);
}

void NcclComm::abort(const Status &cause) {
  if (aborted_)
    return;
  aborted_ = true;
  abort_cause_ = cause;
}

Status NcclComm::sync_event(cudaEvent_t event, const Group &g, uint64_t seq,
                            const Desc &d) {
  const double t0 = now_s();
  int spins = 0;
  for (;;) {
    cudaError_t rc = cudaEventQuery(event);
    if (rc == cudaSuccess)
      return Status::Ok();
    if (rc != cudaErrorNotReady)
      return cuda(rc, "cudaEventQuery");
    ncclResult_t async = ncclSuccess;
    if (g.comm)
      ncclCommGetAsyncError(g.comm, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      return nccl(async, "NCCL collective");
    double waited = now_s() - t0;
    if (options.timeout_s > 0 && waited >= options.timeout_s)
      return Status(
          FSDPRT_ERR_TIMEOUT,
          format("timeout after %.3g s in collective #%llu %s on group %s: "
                 "the NCCL operation did not complete (a rank of the group "
                 "did not call it or is stuck; %s)",
                 waited, (unsigned long long)(seq + 1), describe(d).c_str(),
                 g.name.c_str(), g.members.c_str()));
    if (++spins > 64)
      sched_yield();
  }
}

Status NcclComm::check_descriptors(Group &g, uint64_t seq, const Desc &d) {
  desc_host_[g.member] = d;
  Status st =
      cuda(cudaMemcpyAsync(desc_device_ + g.member, &desc_host_[g.member],
                           sizeof(Desc), cudaMemcpyHostToDevice, stream_),
           "cudaMemcpyAsync");
  if (st.ok())
    st = nccl(ncclAllGather(desc_device_ + g.member, desc_device_, sizeof(Desc),
                            ncclUint8, g.comm, stream_),
              "ncclAllGather");
  if (st.ok())
    st = cuda(cudaMemcpyAsync(desc_host_, desc_device_,
                              size_t(g.k) * sizeof(Desc),
                              cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync");
  if (st.ok())
    st = cuda(cudaEventRecord(desc_event_, stream_), "cudaEventRecord");
  if (st.ok())
    st = sync_event(desc_event_, g, seq, d);
  if (!st.ok())
    return st;
  for (int j = 1; j < g.k; ++j)
    if (desc_host_[j] != desc_host_[0])
      return Status(
          FSDPRT_ERR_DESYNC,
          format("desync in collective #%llu on group %s: rank %lld called "
                 "%s but rank %lld called %s (%s)",
                 (unsigned long long)(seq + 1), g.name.c_str(),
                 (long long)g.ranks[0], describe(desc_host_[0]).c_str(),
                 (long long)g.ranks[size_t(j)], describe(desc_host_[j]).c_str(),
                 g.members.c_str()));
  return Status::Ok();
}

Status NcclComm::start(const Desc &desc, const void *send, void *recv,
                       fsdprt_request **request) {
  if (aborted_)
    return Status(FSDPRT_ERR_ABORTED,
                  format("rank %lld: aborted: %s", (long long)rank,
                         abort_cause_.message.c_str()));
  Status st = cuda(cudaSetDevice(device_), "cudaSetDevice");
  if (!st.ok())
    return st;
  Group &g = groups_[size_t(desc.mask)];
  auto r = std::make_unique<NcclRequest>();
  r->comm = this;
  r->group = &g;
  r->desc = desc;
  r->seq = g.next_seq++;
  const size_t es = fsdprt_dtype_size(desc.dtype);
  ncclDataType_t type = ncclFloat32;
  nccl_dtype(desc.dtype, &type);
  if (g.k > 1 && options.check_desync) {
    st = check_descriptors(g, r->seq, desc);
    if (!st.ok()) {
      abort(st);
      return st;
    }
  }
  const size_t n = size_t(desc.count);
  if (g.k == 1) {
    if (send != recv && n)
      st = cuda(cudaMemcpyAsync(recv, send, n * es, cudaMemcpyDeviceToDevice,
                                stream_),
                "cudaMemcpyAsync");
  } else if (desc.kind == FSDPRT_KIND_ALL_GATHER) {
    st = nccl(ncclAllGather(send, recv, n, type, g.comm, stream_),
              "ncclAllGather");
  } else if (desc.kind == FSDPRT_KIND_REDUCE_SCATTER) {
    st = nccl(ncclReduceScatter(send, recv, n, type, nccl_op(desc.op), g.comm,
                                stream_),
              "ncclReduceScatter");
  } else {
    st = nccl(
        ncclAllReduce(send, recv, n, type, nccl_op(desc.op), g.comm, stream_),
        "ncclAllReduce");
  }
  if (st.ok())
    st = cuda(cudaEventCreateWithFlags(&r->event, cudaEventDisableTiming),
              "cudaEventCreate");
  if (st.ok())
    st = cuda(cudaEventRecord(r->event, stream_), "cudaEventRecord");
  if (!st.ok()) {
    abort(st);
    return st;
  }
  *request = r.release();
  return Status::Ok();
}

Status NcclComm::wait(fsdprt_request *request) {
  auto *r = static_cast<NcclRequest *>(request);
  if (r->done)
    return r->result;
  cudaSetDevice(device_);
  Status st = sync_event(r->event, *r->group, r->seq, r->desc);
  if (!st.ok())
    abort(st);
  r->done = true;
  r->result = st;
  return st;
}

Status NcclComm::test(fsdprt_request *request, bool *done) {
  auto *r = static_cast<NcclRequest *>(request);
  if (!r->done) {
    cudaSetDevice(device_);
    cudaError_t rc = cudaEventQuery(r->event);
    if (rc == cudaSuccess) {
      r->done = true;
    } else if (rc != cudaErrorNotReady) {
      r->done = true;
      r->result = cuda(rc, "cudaEventQuery");
      abort(r->result);
    }
  }
  *done = r->done;
  return r->result;
}

} // namespace
} // namespace fsdprt

using namespace fsdprt;

extern "C" {

fsdprt_status_t fsdprt_nccl_get_unique_id(fsdprt_nccl_id_t *id) {
  if (!id)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  ncclUniqueId uid;
  if (ncclGetUniqueId(&uid) != ncclSuccess)
    return FSDPRT_ERR_BACKEND;
  std::memset(id, 0, sizeof(*id));
  std::memcpy(id->bytes, &uid, sizeof(uid));
  return FSDPRT_OK;
}

fsdprt_status_t
fsdprt_nccl_comm_create(int32_t ndims, const int64_t *shape, int64_t rank,
                        const fsdprt_nccl_id_t *id, int32_t cuda_device,
                        const fsdprt_options_t *options, fsdprt_comm_t **comm) {
  if (!comm || !id)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  *comm = nullptr;
  Mesh mesh;
  Status st = Mesh::create(ndims, shape,
                           options ? options->axis_names : nullptr, &mesh);
  if (!st.ok())
    return st.code;
  if (rank < 0 || rank >= mesh.size)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      cuda_device < 0 || cuda_device >= devices)
    return FSDPRT_ERR_BACKEND;
  auto c = std::make_unique<NcclComm>();
  c->backend = FSDPRT_BACKEND_NCCL;
  c->mesh = mesh;
  c->options = resolve_options(options);
  c->rank = rank;
  ncclUniqueId uid;
  std::memcpy(&uid, id->bytes, sizeof(uid));
  st = c->init(uid, cuda_device);
  if (!st.ok())
    return st.code;
  *comm = c.release();
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_nccl_comm_set_stream(fsdprt_comm_t *comm,
                                            void *cuda_stream) {
  auto *c = dynamic_cast<NcclComm *>(comm);
  if (!c)
    return FSDPRT_ERR_INVALID_ARGUMENT;
  c->set_stream(static_cast<cudaStream_t>(cuda_stream));
  return FSDPRT_OK;
}

} // extern "C"
