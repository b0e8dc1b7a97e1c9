// nccl backend: one process (or thread) per GPU; buffers are device
// pointers and collectives overlap with the rank's compute.
//
// Each rank works through a GPU context (runtime/cuda): a compute stream and
// a communication stream. start() records an event on the compute stream
// (so the collective reads what the kernels before it wrote), makes the
// communication stream wait on it, enqueues NCCL there and records `done`;
// wait() makes the compute stream wait on `done` without blocking the host.
// Events come from the context's pool. A watchdog thread per communicator
// follows the collectives in flight: one that does not finish within the
// timeout (counted from when its inputs are ready) or an asynchronous NCCL
// error aborts the NCCL communicators (ncclCommAbort), which ends the
// stuck kernels, and records the rank and the collective as the comm's
// error, so a stuck job ends with a message instead of hanging.
//
// One NCCL communicator per group mask is split from the world
// communicator at creation (ncclCommSplit is collective over the world).
// The descriptor check (all-gather of the descriptors, compared on the
// host: a small collective and a host synchronization) runs on the first
// collectives of each group only (FSDPRT_NCCL_DESYNC_CHECKS, default 64;
// -1: all; fsdprt_nccl_comm_set_desync_checks), so steady-state steps do
// not pay for it. Reductions use NCCL's own algorithms (not the CPU
// backends' rank order).
#include "common.h"

#include "../cuda/cuda_libraries.h"
#include "../cuda/gpu_internal.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sched.h>
#include <thread>

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error "the nccl backend needs NCCL >= 2.18 (ncclCommSplit)"
#endif

static_assert(sizeof(ncclUniqueId) <= sizeof(fsdprt_nccl_id_t),
              "fsdprt_nccl_id_t must hold an ncclUniqueId");

namespace fsdprt {
namespace {

// NCCL's functions: the library is opened by the first unique id or
// communicator (fsdprt_nccl_get_unique_id, fsdprt_nccl_comm_create), so
// every call below runs after it loaded (cuda_libraries.h).
const gpu::NcclLibrary &nccl_api() { return gpu::nccl_library(); }

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
  int64_t checks_left = 0; // descriptor checks still to run (-1: all)
};

// One collective between start() and its completion on the device. Owned
// by its request and by the watchdog, so its events go back to the pool
// only when both are done with them.
struct Inflight {
  fsdprt_gpu_context *ctx = nullptr;
  cudaEvent_t ready = nullptr; // the inputs are written (compute stream)
  cudaEvent_t done = nullptr;  // the collective finished (comm stream)
  Desc desc;
  const Group *group = nullptr;
  uint64_t seq = 0;
  double ready_at = 0; // when the watchdog first saw `ready` complete
  std::atomic<bool> complete{false};
  ~Inflight() {
    ctx->events.release(ready);
    ctx->events.release(done);
  }
};

struct NcclRequest : fsdprt_request {
  std::shared_ptr<Inflight> op;
  bool done = false;
  Status result;
};

int64_t default_desync_checks() {
  const char *env = std::getenv("FSDPRT_NCCL_DESYNC_CHECKS");
  return env && *env ? std::strtoll(env, nullptr, 10) : 64;
}

class NcclComm : public fsdprt_comm {
public:
  ~NcclComm() override;
  Status init(const ncclUniqueId &id, int device);

  Status start(const Desc &desc, const void *send, void *recv,
               fsdprt_request **request) override;
  Status wait(fsdprt_request *request) override;
  Status test(fsdprt_request *request, bool *done) override;
  Status run(const Desc &desc, const void *send, void *recv) override;
  void abort(const Status &cause) override;
  void attach_thread() override { fsdprt_gpu_set_thread_context(ctx_); }
  bool host_blocks() const override { return false; }
  bool host_buffers() const override { return false; }
  // A member layout is one NCCL group of per-member collectives.
  bool native_member_layout() const override { return true; }
  void collect_exposed() const override;
  // The abort of the rank's communicators (the watchdog's timeout, an
  // asynchronous NCCL error, or an error of the rank's own calls).
  Status async_error() const override;

  void set_stream(cudaStream_t s) { compute_ = s ? s : ctx_->compute; }
  void set_desync_checks(int64_t n) {
    for (Group &g : groups_)
      g.checks_left = n;
  }
  fsdprt_gpu_context *context() const { return ctx_; }

private:
  Status cuda(cudaError_t rc, const char *what);
  Status nccl(ncclResult_t rc, const char *what);
  Status aborted_status();
  Status init_context(int device);
  Status split_groups();
  // Waits on the host for `event` (descriptor check, synchronous calls).
  Status sync_event(cudaEvent_t event, const Group &g, uint64_t seq,
                    const Desc &d);
  Status check_descriptors(Group &g, uint64_t seq, const Desc &d);
  Status enqueue(const Group &g, const Desc &d, const void *send, void *recv);
  Status enqueue_members(const Group &g, const Desc &d, const void *send,
                         void *recv, ncclDataType_t type);
  Status order_after_compute(Inflight &op);
  // The compute stream waits for `op`, between two timed events.
  Status order_compute_after(const Inflight &op);

  // The watchdog (its own thread; see the file comment).
  void watch();
  // Drops the finished collectives, so their events return to the pool
  // before a new collective takes some (steady state creates none).
  void reap();
  bool poll(Inflight &op, double now);
  void check_async_errors();
  // ncclCommAbort on every communicator (they are unusable afterwards).
  void abort_nccl(const Status &cause);

  int device_ = 0;
  fsdprt_gpu_context *ctx_ = nullptr;
  bool owns_ctx_ = false;
  cudaStream_t compute_ = nullptr;
  ncclComm_t world_ = nullptr;
  std::vector<Group> groups_;
  Desc *desc_device_ = nullptr; // k descriptors, all-gathered per check
  Desc *desc_host_ = nullptr;   // pinned copy
  cudaEvent_t desc_event_ = nullptr;

  std::mutex nccl_mu_; // NCCL calls of the rank vs the watchdog's abort
  std::atomic<bool> aborted_{false};
  mutable std::mutex cause_mu_;
  Status abort_cause_;

  // Timed events on each side of the compute stream's waits, in order;
  // collect_exposed() adds the finished ones to stat_exposed_ns.
  struct TimedWait {
    cudaEvent_t before = nullptr, after = nullptr;
  };
  mutable std::mutex timed_mu_;
  mutable std::vector<TimedWait> timed_waits_;

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  std::vector<std::shared_ptr<Inflight>> inflight_;
  bool stop_ = false;
  std::thread watchdog_;
};

Status NcclComm::cuda(cudaError_t rc, const char *what) {
  if (rc == cudaSuccess)
    return Status::Ok();
  return gpu::cuda_status(
      rc, format("rank %lld (GPU %d): %s", (long long)rank, device_, what));
}

Status NcclComm::nccl(ncclResult_t rc, const char *what) {
  if (rc == ncclSuccess)
    return Status::Ok();
  return Status(FSDPRT_ERR_BACKEND,
                format("rank %lld (GPU %d): %s failed: %s", (long long)rank,
                       device_, what, nccl_api().ncclGetErrorString(rc)));
}

Status NcclComm::aborted_status() {
  std::lock_guard<std::mutex> lock(cause_mu_);
  return Status(FSDPRT_ERR_ABORTED,
                format("rank %lld: aborted: %s", (long long)rank,
                       abort_cause_.message.c_str()));
}

Status NcclComm::async_error() const {
  if (!aborted_)
    return Status::Ok();
  std::lock_guard<std::mutex> lock(cause_mu_);
  return abort_cause_;
}

// The thread's context when it is on `device`, else one of our own.
Status NcclComm::init_context(int device) {
  fsdprt_gpu_context *cur = fsdprt_gpu_get_thread_context();
  if (cur && cur->device == device) {
    ctx_ = cur;
  } else {
    if (fsdprt_gpu_context_create(device, &ctx_) != FSDPRT_OK)
      return Status(FSDPRT_ERR_NO_DEVICE,
                    format("rank %lld: %s", (long long)rank,
                           fsdprt_gpu_last_error_message()));
    owns_ctx_ = true;
  }
  compute_ = ctx_->compute;
  fsdprt_gpu_set_thread_context(ctx_);
  return Status::Ok();
}

Status NcclComm::split_groups() {
  groups_.resize(size_t(mesh.num_masks()));
  const int64_t checks = options.check_desync ? default_desync_checks() : 0;
  for (int64_t mask = 0; mask < mesh.num_masks(); ++mask) {
    Group &g = groups_[size_t(mask)];
    int64_t gr = 0, gid = 0;
    mesh.group(rank, mask, &g.ranks, &gr, &gid);
    g.k = int(g.ranks.size());
    g.member = int(gr);
    g.name = mesh.group_axes(mask);
    g.members = "group ranks " + join_ranks(g.ranks);
    g.checks_left = checks;
    // Every rank takes part in every split (NCCL_SPLIT_NOCOLOR never
    // applies: each rank belongs to exactly one group per mask).
    Status st = nccl(
        nccl_api().ncclCommSplit(world_, int(gid), int(gr), &g.comm, nullptr),
        "ncclCommSplit");
    if (!st.ok())
      return st;
  }
  return Status::Ok();
}

Status NcclComm::init(const ncclUniqueId &id, int device) {
  device_ = device;
  Status st = init_context(device);
  if (!st.ok())
    return st;
  st = nccl(nccl_api().ncclCommInitRank(&world_, int(mesh.size), id, int(rank)),
            "ncclCommInitRank");
  if (!st.ok()) {
    if (NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 0))
      st.message += " (NCCL before 2.30 refuses two ranks on one GPU)";
    return st;
  }
  st = split_groups();
  if (!st.ok())
    return st;
  int64_t max_k = 1;
  for (const Group &g : groups_)
    max_k = std::max<int64_t>(max_k, g.k);
  st = cuda(cudaMalloc(reinterpret_cast<void **>(&desc_device_),
                       size_t(max_k) * sizeof(Desc)),
            "cudaMalloc");
  if (st.ok())
    st = cuda(cudaMallocHost(reinterpret_cast<void **>(&desc_host_),
                             size_t(max_k) * sizeof(Desc)),
              "cudaMallocHost");
  if (st.ok())
    st = cuda(ctx_->events.acquire(&desc_event_), "cudaEventCreate");
  if (st.ok())
    watchdog_ = std::thread([this] { watch(); });
  return st;
}

NcclComm::~NcclComm() {
  {
    // Collectives in flight finish (or time out through the watchdog)
    // before their communicators go away.
    std::unique_lock<std::mutex> lock(watch_mu_);
    while (!inflight_.empty() && !aborted_ && watchdog_.joinable()) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
    }
    stop_ = true;
  }
  watch_cv_.notify_all();
  if (watchdog_.joinable())
    watchdog_.join();
  cudaSetDevice(device_);
  // An aborted descriptor check leaves its copies between desc_device_ and
  // desc_host_ queued on the communication stream (they run once the abort
  // ends the NCCL kernel): they finish before the buffers go, without
  // relying on cudaFree's implicit synchronization.
  if (ctx_)
    cudaStreamSynchronize(ctx_->comm);
  inflight_.clear();
  if (ctx_) {
    // Not synchronized (a stuck collective would hold the compute stream):
    // an event still pending goes back to the pool, as CUDA allows.
    collect_exposed();
    for (const TimedWait &w : timed_waits_) {
      ctx_->timed_events.release(w.before);
      ctx_->timed_events.release(w.after);
    }
  }
  for (Group &g : groups_)
    if (g.comm)
      aborted_ ? nccl_api().ncclCommAbort(g.comm)
               : nccl_api().ncclCommDestroy(g.comm);
  if (world_)
    aborted_ ? nccl_api().ncclCommAbort(world_)
             : nccl_api().ncclCommDestroy(world_);
  if (desc_event_)
    ctx_->events.release(desc_event_);
  if (desc_device_)
    cudaFree(desc_device_);
  if (desc_host_)
    cudaFreeHost(desc_host_);
  if (owns_ctx_)
    fsdprt_gpu_context_destroy(ctx_);
}

void NcclComm::abort(const Status &cause) {
  if (aborted_.exchange(true))
    return;
  std::lock_guard<std::mutex> lock(cause_mu_);
  abort_cause_ = cause;
}

void NcclComm::abort_nccl(const Status &cause) {
  std::lock_guard<std::mutex> lock(nccl_mu_);
  const bool first = !aborted_.load();
  abort(cause);
  record_error(cause);
  if (first)
    std::fprintf(stderr, "fsdprt: error: %s\n", cause.message.c_str());
  // Ends the kernels waiting for peers; the handles are freed by NCCL.
  for (Group &g : groups_)
    if (g.comm) {
      nccl_api().ncclCommAbort(g.comm);
      g.comm = nullptr;
    }
  if (world_) {
    nccl_api().ncclCommAbort(world_);
    world_ = nullptr;
  }
}

Status NcclComm::sync_event(cudaEvent_t event, const Group &g, uint64_t seq,
                            const Desc &d) {
  const double t0 = now_s();
  int spins = 0;
  for (;;) {
    cudaError_t rc = cudaEventQuery(event);
    if (rc == cudaSuccess)
      return aborted_ ? aborted_status() : Status::Ok();
    if (rc != cudaErrorNotReady)
      return cuda(rc, "cudaEventQuery");
    if (aborted_)
      return aborted_status();
    double waited = now_s() - t0;
    if (options.timeout_s > 0 && waited >= options.timeout_s) {
      Status st(
          FSDPRT_ERR_TIMEOUT,
          format("rank %lld: timeout after %.3g s in collective #%llu %s on "
                 "group %s: the NCCL operation did not complete (a rank of "
                 "the group did not call it or is stuck; NCCL cannot tell "
                 "which; %s); the communicator was aborted",
                 (long long)rank, waited, (unsigned long long)(seq + 1),
                 describe(d).c_str(), g.name.c_str(), g.members.c_str()));
      abort_nccl(st);
      return st;
    }
    if (++spins > 64)
      sched_yield();
  }
}

Status NcclComm::check_descriptors(Group &g, uint64_t seq, const Desc &d) {
  desc_host_[g.member] = d;
  cudaStream_t s = ctx_->comm;
  Status st;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    if (aborted_)
      return aborted_status();
    st = cuda(cudaMemcpyAsync(desc_device_ + g.member, &desc_host_[g.member],
                              sizeof(Desc), cudaMemcpyHostToDevice, s),
              "cudaMemcpyAsync");
    if (st.ok())
      st = nccl(nccl_api().ncclAllGather(desc_device_ + g.member, desc_device_,
                                         sizeof(Desc), ncclUint8, g.comm, s),
                "ncclAllGather");
    if (st.ok())
      st = cuda(cudaMemcpyAsync(desc_host_, desc_device_,
                                size_t(g.k) * sizeof(Desc),
                                cudaMemcpyDeviceToHost, s),
                "cudaMemcpyAsync");
    if (st.ok())
      st = cuda(cudaEventRecord(desc_event_, s), "cudaEventRecord");
  }
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

// The collective itself on the communication stream (nccl_mu_ held).
Status NcclComm::enqueue(const Group &g, const Desc &desc, const void *send,
                         void *recv) {
  cudaStream_t s = ctx_->comm;
  const size_t n = size_t(desc.count);
  const size_t es = fsdprt_dtype_size(desc.dtype);
  ncclDataType_t type = ncclFloat32;
  nccl_dtype(desc.dtype, &type);
  if (g.k == 1)
    return send == recv || n == 0
               ? Status::Ok()
               : cuda(cudaMemcpyAsync(recv, send, n * es,
                                      cudaMemcpyDeviceToDevice, s),
                      "cudaMemcpyAsync");
  if (desc.n_members > 1)
    return enqueue_members(g, desc, send, recv, type);
  if (desc.kind == FSDPRT_KIND_ALL_GATHER)
    return nccl(nccl_api().ncclAllGather(send, recv, n, type, g.comm, s),
                "ncclAllGather");
  if (desc.kind == FSDPRT_KIND_REDUCE_SCATTER)
    return nccl(nccl_api().ncclReduceScatter(send, recv, n, type,
                                             nccl_op(desc.op), g.comm, s),
                "ncclReduceScatter");
  return nccl(nccl_api().ncclAllReduce(send, recv, n, type, nccl_op(desc.op),
                                       g.comm, s),
              "ncclAllReduce");
}

// A member layout (docs/RUNTIME.md): member i's all-gather sends
// send[off_i : off_i + c_i] and receives at k * off_i; its reduce-scatter
// reduces the k * c_i elements at k * off_i into recv[off_i : off_i + c_i].
// One NCCL group of the per-member collectives (k > 1): NCCL launches it as
// one operation, so the layout needs no staging buffer and no copies.
Status NcclComm::enqueue_members(const Group &g, const Desc &desc,
                                 const void *send, void *recv,
                                 ncclDataType_t type) {
  cudaStream_t s = ctx_->comm;
  const size_t es = fsdprt_dtype_size(desc.dtype);
  const size_t k = size_t(g.k);
  const auto *in = static_cast<const char *>(send);
  auto *out = static_cast<char *>(recv);
  Status st = nccl(nccl_api().ncclGroupStart(), "ncclGroupStart");
  if (!st.ok())
    return st;
  size_t off = 0;
  for (int64_t i = 0; i < desc.n_members && st.ok(); ++i) {
    const size_t c = size_t(desc.members[i]);
    if (c == 0)
      continue;
    if (desc.kind == FSDPRT_KIND_ALL_GATHER)
      st = nccl(nccl_api().ncclAllGather(in + off * es, out + k * off * es, c,
                                         type, g.comm, s),
                "ncclAllGather");
    else
      st = nccl(nccl_api().ncclReduceScatter(in + k * off * es, out + off * es,
                                             c, type, nccl_op(desc.op), g.comm,
                                             s),
                "ncclReduceScatter");
    off += c;
  }
  // The group ends even after a failed call (NCCL's group state is per
  // thread); the first error is the one reported.
  Status end = nccl(nccl_api().ncclGroupEnd(), "ncclGroupEnd");
  return st.ok() ? end : st;
}

// `ready` on the compute stream, the communication stream waiting on it.
Status NcclComm::order_after_compute(Inflight &op) {
  Status st = cuda(ctx_->events.acquire(&op.ready), "cudaEventCreate");
  if (st.ok())
    st = cuda(cudaEventRecord(op.ready, compute_), "cudaEventRecord");
  if (st.ok())
    st = cuda(cudaStreamWaitEvent(ctx_->comm, op.ready, 0),
              "cudaStreamWaitEvent");
  return st;
}

Status NcclComm::start(const Desc &desc, const void *send, void *recv,
                       fsdprt_request **request) {
  if (aborted_)
    return aborted_status();
  Group &g = groups_[size_t(desc.mask)];
  // A captured collective (fsdprt_gpu_capture_begin) runs at each replay of
  // the graph: its events belong to the capture, so neither the watchdog
  // nor the exposed-time measurement follows it.
  const bool captured = ctx_->capturing;
  if (!captured) {
    reap();
    collect_exposed(); // returns the timed events of the passed waits
  }
  auto op = std::make_shared<Inflight>();
  op->ctx = ctx_;
  op->desc = desc;
  op->group = &g;
  op->seq = g.next_seq++;
  Status st;
  if (g.k > 1 && g.checks_left != 0) {
    if (g.checks_left > 0)
      g.checks_left--;
    if (!gpu::host_wait(ctx_, "the descriptor check of a collective"))
      return Status(ctx_->first_error(), ctx_->first_error_message());
    st = check_descriptors(g, op->seq, desc);
    if (!st.ok()) {
      abort(st);
      return st;
    }
  }
  st = order_after_compute(*op);
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    if (st.ok() && aborted_)
      st = aborted_status();
    if (st.ok())
      st = enqueue(g, desc, send, recv);
    if (st.ok())
      st = cuda(ctx_->events.acquire(&op->done), "cudaEventCreate");
    if (st.ok())
      st = cuda(cudaEventRecord(op->done, ctx_->comm), "cudaEventRecord");
  }
  if (!st.ok()) {
    abort(st);
    return st;
  }
  if (!captured) {
    std::lock_guard<std::mutex> lock(watch_mu_);
    inflight_.push_back(op);
  }
  watch_cv_.notify_one();
  auto r = std::make_unique<NcclRequest>();
  r->comm = this;
  r->op = std::move(op);
  *request = r.release();
  return Status::Ok();
}

// The time between the two events is how long the compute stream stood
// still for the collective: `before` completes when the kernels before the
// wait are done, `after` when the collective is too. A timing event that
// cannot be had costs the measurement, not the collective.
Status NcclComm::order_compute_after(const Inflight &op) {
  if (ctx_->capturing)
    return cuda(cudaStreamWaitEvent(compute_, op.done, 0),
                "cudaStreamWaitEvent");
  TimedWait w;
  bool timed = ctx_->timed_events.acquire(&w.before) == cudaSuccess &&
               ctx_->timed_events.acquire(&w.after) == cudaSuccess &&
               cudaEventRecord(w.before, compute_) == cudaSuccess;
  Status st =
      cuda(cudaStreamWaitEvent(compute_, op.done, 0), "cudaStreamWaitEvent");
  if (timed && st.ok() && cudaEventRecord(w.after, compute_) == cudaSuccess) {
    std::lock_guard<std::mutex> lock(timed_mu_);
    timed_waits_.push_back(w);
  } else {
    ctx_->timed_events.release(w.before);
    ctx_->timed_events.release(w.after);
  }
  return st;
}

void NcclComm::collect_exposed() const {
  std::lock_guard<std::mutex> lock(timed_mu_);
  // The compute stream passes its waits in order: stop at the first one
  // it has not passed.
  size_t n = 0;
  uint64_t ns = 0;
  for (; n < timed_waits_.size(); ++n) {
    const TimedWait &w = timed_waits_[n];
    float ms = 0;
    if (cudaEventQuery(w.after) != cudaSuccess)
      break;
    if (cudaEventElapsedTime(&ms, w.before, w.after) == cudaSuccess && ms > 0)
      ns += uint64_t(double(ms) * 1e6);
    ctx_->timed_events.release(w.before);
    ctx_->timed_events.release(w.after);
  }
  timed_waits_.erase(timed_waits_.begin(), timed_waits_.begin() + long(n));
  stat_exposed_ns.fetch_add(ns, std::memory_order_relaxed);
}

// Orders the compute stream after the collective; the host does not wait.
Status NcclComm::wait(fsdprt_request *request) {
  auto *r = static_cast<NcclRequest *>(request);
  if (r->done)
    return r->result;
  r->done = true;
  r->result = aborted_ ? aborted_status() : order_compute_after(*r->op);
  if (!r->result.ok())
    abort(r->result);
  return r->result;
}

Status NcclComm::test(fsdprt_request *request, bool *done) {
  auto *r = static_cast<NcclRequest *>(request);
  if (!r->done && !gpu::host_wait(ctx_, "fsdprt_test"))
    return Status(ctx_->first_error(), ctx_->first_error_message());
  if (!r->done) {
    cudaError_t rc =
        r->op->complete ? cudaSuccess : cudaEventQuery(r->op->done);
    if (aborted_) {
      r->done = true;
      r->result = aborted_status();
    } else if (rc == cudaSuccess) {
      r->done = true;
      r->result = cuda(cudaStreamWaitEvent(compute_, r->op->done, 0),
                       "cudaStreamWaitEvent");
    } else if (rc != cudaErrorNotReady) {
      r->done = true;
      r->result = cuda(rc, "cudaEventQuery");
      abort(r->result);
    }
  }
  *done = r->done;
  return r->result;
}

// Synchronous calls keep their contract: the data is there on return.
Status NcclComm::run(const Desc &desc, const void *send, void *recv) {
  if (!gpu::host_wait(ctx_, "a blocking collective"))
    return Status(ctx_->first_error(), ctx_->first_error_message());
  fsdprt_request *req = nullptr;
  Status st = start(desc, send, recv, &req);
  if (!st.ok())
    return st;
  auto *r = static_cast<NcclRequest *>(req);
  for (;;) {
    cudaError_t rc = cudaEventQuery(r->op->done);
    if (rc == cudaSuccess || rc != cudaErrorNotReady || aborted_) {
      st = aborted_            ? aborted_status()
           : rc == cudaSuccess ? wait(req)
                               : cuda(rc, "cudaEventQuery");
      break;
    }
    sched_yield();
  }
  delete req;
  return st;
}

// True when `op` is finished (or abandoned after an abort).
bool NcclComm::poll(Inflight &op, double now) {
  if (aborted_)
    return true;
  if (op.ready_at == 0) {
    cudaError_t rc = cudaEventQuery(op.ready);
    if (rc == cudaSuccess)
      op.ready_at = now;
    else if (rc != cudaErrorNotReady)
      op.ready_at = now; // reported by the query of `done` below
  }
  cudaError_t rc = cudaEventQuery(op.done);
  if (rc == cudaSuccess) {
    op.complete = true;
    return true;
  }
  if (rc != cudaErrorNotReady) {
    abort_nccl(cuda(rc, "collective on the communication stream"));
    return true;
  }
  const double waited = op.ready_at > 0 ? now - op.ready_at : 0;
  if (options.timeout_s > 0 && waited >= options.timeout_s) {
    const Group &g = *op.group;
    abort_nccl(Status(
        FSDPRT_ERR_TIMEOUT,
        format("rank %lld: timeout after %.3g s in collective #%llu %s on "
               "group %s: NCCL did not complete it (a rank of the group did "
               "not call it or is stuck; NCCL cannot tell which; %s); the "
               "communicator was aborted",
               (long long)rank, waited, (unsigned long long)(op.seq + 1),
               describe(op.desc).c_str(), g.name.c_str(), g.members.c_str())));
    return true;
  }
  return false;
}

void NcclComm::check_async_errors() {
  Status st;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    if (aborted_)
      return;
    for (const Group &g : groups_) {
      ncclResult_t async = ncclSuccess;
      if (g.comm)
        nccl_api().ncclCommGetAsyncError(g.comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        st = nccl(async, "NCCL collective (asynchronous error)");
        break;
      }
    }
  }
  if (!st.ok())
    abort_nccl(st);
}

void NcclComm::reap() {
  std::lock_guard<std::mutex> lock(watch_mu_);
  inflight_.erase(std::remove_if(inflight_.begin(), inflight_.end(),
                                 [](const std::shared_ptr<Inflight> &op) {
                                   if (!op->complete &&
                                       cudaEventQuery(op->done) == cudaSuccess)
                                     op->complete = true;
                                   return op->complete.load();
                                 }),
                  inflight_.end());
}

void NcclComm::watch() {
  cudaSetDevice(device_);
  for (;;) {
    std::unique_lock<std::mutex> lock(watch_mu_);
    watch_cv_.wait_for(lock, std::chrono::milliseconds(100),
                       [&] { return stop_ || !inflight_.empty(); });
    if (stop_)
      return;
    // Polled under the lock, so that an op leaves the list (and its events
    // the pool's loan) in one place; queries take microseconds.
    const double now = now_s();
    inflight_.erase(std::remove_if(inflight_.begin(), inflight_.end(),
                                   [&](const std::shared_ptr<Inflight> &op) {
                                     return poll(*op, now);
                                   }),
                    inflight_.end());
    lock.unlock();
    check_async_errors();
    // Fine polling while collectives are in flight; timeouts are seconds.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace
} // namespace fsdprt

using namespace fsdprt;

extern "C" {

fsdprt_status_t fsdprt_nccl_get_unique_id(fsdprt_nccl_id_t *id) {
  if (!id)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  const gpu::NcclLibrary *lib = nullptr;
  Status loaded = gpu::load_nccl(&lib);
  if (!loaded.ok()) {
    gpu::set_last_message(loaded.message, loaded.code);
    return loaded.code;
  }
  ncclUniqueId uid;
  ncclResult_t rc = lib->ncclGetUniqueId(&uid);
  if (rc != ncclSuccess) {
    gpu::set_last_message(
        format("ncclGetUniqueId failed: %s", lib->ncclGetErrorString(rc)));
    return FSDPRT_ERR_BACKEND;
  }
  std::memset(id, 0, sizeof(*id));
  std::memcpy(id->bytes, &uid, sizeof(uid));
  return FSDPRT_OK;
}

fsdprt_status_t
fsdprt_nccl_comm_create(int32_t ndims, const int64_t *shape, int64_t rank,
                        const fsdprt_nccl_id_t *id, int32_t cuda_device,
                        const fsdprt_options_t *options, fsdprt_comm_t **comm) {
  if (!comm || !id)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *comm = nullptr;
  Mesh mesh;
  Status st = Mesh::create(ndims, shape,
                           options ? options->axis_names : nullptr, &mesh);
  if (!st.ok())
    return st.code;
  if (rank < 0 || rank >= mesh.size)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  // NCCL is opened here, by the first communicator (cuda_libraries.h).
  const gpu::NcclLibrary *lib = nullptr;
  st = gpu::load_nccl(&lib);
  if (!st.ok()) {
    gpu::set_last_message(
        format("rank %lld: %s", (long long)rank, st.message.c_str()), st.code);
    return st.code;
  }
  st = gpu::check_device(cuda_device);
  if (!st.ok()) {
    gpu::set_last_message(
        format("rank %lld: %s", (long long)rank, st.message.c_str()), st.code);
    return st.code;
  }
  auto c = std::make_unique<NcclComm>();
  c->backend = FSDPRT_BACKEND_NCCL;
  c->mesh = mesh;
  c->options = resolve_options(options);
  c->rank = rank;
  ncclUniqueId uid;
  std::memcpy(&uid, id->bytes, sizeof(uid));
  st = c->init(uid, cuda_device);
  if (!st.ok()) {
    gpu::set_last_message(st.message, st.code);
    return st.code;
  }
  *comm = c.release();
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_nccl_comm_set_stream(fsdprt_comm_t *comm,
                                            void *cuda_stream) {
  auto *c = dynamic_cast<NcclComm *>(comm);
  if (!c)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  c->set_stream(static_cast<cudaStream_t>(cuda_stream));
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_nccl_comm_set_desync_checks(fsdprt_comm_t *comm,
                                                   int64_t collectives) {
  auto *c = dynamic_cast<NcclComm *>(comm);
  if (!c)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  c->set_desync_checks(collectives);
  return FSDPRT_OK;
}

fsdprt_gpu_context_t *fsdprt_nccl_comm_context(fsdprt_comm_t *comm) {
  auto *c = dynamic_cast<NcclComm *>(comm);
  return c ? c->context() : nullptr;
}

} // extern "C"
