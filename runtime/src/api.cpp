// Front end of the C API: argument checks, statistics, error recording and
// the entry points called by compiled code.
#include "common.h"

#include <chrono>
#include <limits>
#include <memory>
#include <new>

using namespace fsdprt;

namespace {

thread_local std::string tls_message;
thread_local fsdprt_comm *tls_comm = nullptr;

const char *tls_copy(std::string s) {
  tls_message = std::move(s);
  return tls_message.c_str();
}

std::mutex process_mu;
fsdprt_status_t process_code = FSDPRT_OK;
std::string process_msg;

void record_process_error(fsdprt_status_t code, const std::string &msg) {
  set_last_error(code, msg);
  std::lock_guard<std::mutex> lock(process_mu);
  if (process_code == FSDPRT_OK) {
    process_code = code;
    process_msg = msg;
  }
}

Status validate(const fsdprt_comm *c, const Desc &d, const void *send,
                const void *recv) {
  auto invalid = [&](const std::string &what) {
    return Status(FSDPRT_ERR_INVALID_ARGUMENT,
                  format("rank %lld: invalid argument: %s: %s",
                         (long long)c->rank, kind_name(d.kind), what.c_str()));
  };
  if (d.mask < 0 || d.mask >= c->mesh.num_masks())
    return invalid(format("group mask %lld selects axes outside the %d-axis "
                          "mesh",
                          (long long)d.mask, (int)c->mesh.ndims));
  if (fsdprt_dtype_size(d.dtype) == 0)
    return invalid(format("unknown dtype %d", (int)d.dtype));
  if (d.kind != FSDPRT_KIND_ALL_GATHER &&
      (d.op < 0 || d.op >= FSDPRT_NUM_REDUCE_OPS))
    return invalid(format("unknown reduce op %d", (int)d.op));
  if (d.count < 0)
    return invalid(format("negative count %lld", (long long)d.count));
  const int64_t k = c->mesh.group_size(d.mask);
  const int64_t es = int64_t(fsdprt_dtype_size(d.dtype));
  if (d.count > (std::numeric_limits<int64_t>::max() / 4) / (k * es))
    return invalid(format("count %lld is too large", (long long)d.count));
  if (d.count > 0 && (!send || !recv))
    return invalid("NULL buffer");
  if (d.n_members < 0)
    return invalid(
        format("negative number of members %lld", (long long)d.n_members));
  if (d.n_members > 0 && !d.members)
    return invalid(
        format("NULL member_counts for %lld members", (long long)d.n_members));
  int64_t sum = 0;
  for (int64_t i = 0; i < d.n_members; ++i) {
    if (d.members[i] < 0)
      return invalid(format("member %lld has a negative count %lld",
                            (long long)i, (long long)d.members[i]));
    if (d.members[i] > d.count - sum)
      return invalid(format("the counts of the %lld members add up to more "
                            "than the count %lld",
                            (long long)d.n_members, (long long)d.count));
    sum += d.members[i];
  }
  if (d.n_members > 0 && sum != d.count)
    return invalid(format("the counts of the %lld members add up to %lld, "
                          "not the count %lld",
                          (long long)d.n_members, (long long)sum,
                          (long long)d.count));
  if (d.n_members > 1 && k > 1 && d.count > 0) {
    const uintptr_t s = reinterpret_cast<uintptr_t>(send);
    const uintptr_t r = reinterpret_cast<uintptr_t>(recv);
    const uintptr_t send_bytes = uintptr_t(send_elems(d, k) * es);
    const uintptr_t recv_bytes = uintptr_t(recv_elems(d, k) * es);
    if (s < r + recv_bytes && r < s + send_bytes)
      return invalid("send and recv overlap (a member layout cannot run in "
                     "place)");
  }
  return Status::Ok();
}

// A validated member layout: one member is the plain collective, and the
// counts' digest is what the ranks compare.
void finish_members(Desc *d) {
  if (d->n_members <= 1) {
    d->n_members = 0;
    d->members = nullptr;
    d->members_hash = 0;
    return;
  }
  d->members_hash = hash_members(d->n_members, d->members);
}

// The member layout on a backend without native support: the plain
// collective on a rank-major scratch buffer, permuted from (reduce_scatter,
// before the start) or into (all_gather, at completion) the caller's
// member-major buffer.
struct MemberLayoutRequest : fsdprt_request {
  fsdprt_request *inner = nullptr; // the plain collective's request
  Desc desc;                       // members points to counts
  std::vector<int64_t> counts;
  int64_t k = 1;
  std::unique_ptr<char[]> scratch; // k * count elements, rank-major
  void *recv = nullptr;

  size_t scratch_bytes = 0; // its capacity

  ~MemberLayoutRequest() override {
    delete inner;
    release_scratch();
  }

  // Takes a pooled buffer of at least `bytes` (the smallest that fits).
  void acquire_scratch(size_t bytes) {
    auto &pool = comm->scratch_free;
    auto best = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it)
      if (it->first >= bytes && (best == pool.end() || it->first < best->first))
        best = it;
    if (best != pool.end()) {
      scratch_bytes = best->first;
      scratch = std::move(best->second);
      pool.erase(best);
      return;
    }
    scratch.reset(new char[bytes]);
    scratch_bytes = bytes;
  }
  void release_scratch() {
    if (scratch)
      comm->scratch_free.emplace_back(scratch_bytes, std::move(scratch));
    scratch_bytes = 0;
  }

  // After the plain collective completed with `st`.
  Status finish(Status st) {
    delete inner;
    inner = nullptr;
    if (st.ok() && desc.kind == FSDPRT_KIND_ALL_GATHER)
      rank_major_to_members(desc, k, fsdprt_dtype_size(desc.dtype),
                            scratch.get(), recv);
    release_scratch();
    return st;
  }
};

// Runs (request == nullptr) or starts a member-layout collective through a
// scratch buffer.
Status members_through_scratch(fsdprt_comm *c, const Desc &d, const void *send,
                               void *recv, fsdprt_request **request) {
  auto req = std::make_unique<MemberLayoutRequest>();
  req->comm = c;
  req->counts.assign(d.members, d.members + d.n_members);
  req->desc = d;
  req->desc.members = req->counts.data();
  req->k = c->mesh.group_size(d.mask);
  req->recv = recv;
  const size_t es = fsdprt_dtype_size(d.dtype);
  req->acquire_scratch(size_t(req->k * d.count) * es);
  char *scratch = req->scratch.get();
  Status st;
  if (d.kind == FSDPRT_KIND_ALL_GATHER) {
    if (!request)
      return req->finish(c->run(req->desc, send, scratch));
    st = c->start(req->desc, send, scratch, &req->inner);
  } else {
    members_to_rank_major(req->desc, req->k, es, send, scratch);
    if (!request)
      return req->finish(c->run(req->desc, scratch, recv));
    st = c->start(req->desc, scratch, recv, &req->inner);
  }
  if (!st.ok())
    return st;
  *request = req.release();
  return Status::Ok();
}

// Waits for (done == nullptr) or tests a request of any collective.
Status complete(fsdprt_comm *c, fsdprt_request *req, bool *done) {
  auto *m = dynamic_cast<MemberLayoutRequest *>(req);
  fsdprt_request *inner = m ? m->inner : req;
  Status st;
  if (done) {
    st = c->test(inner, done);
    if (!*done)
      return st;
  } else {
    st = c->wait(inner);
  }
  return m ? m->finish(st) : st;
}

void count_stats(fsdprt_comm *c, const Desc &d) {
  const int64_t k = c->mesh.group_size(d.mask);
  const uint64_t es = fsdprt_dtype_size(d.dtype);
  c->stat_calls[d.kind].fetch_add(1, std::memory_order_relaxed);
  c->stat_sent[d.kind].fetch_add(uint64_t(send_elems(d, k)) * es,
                                 std::memory_order_relaxed);
  c->stat_received[d.kind].fetch_add(uint64_t(recv_elems(d, k)) * es,
                                     std::memory_order_relaxed);
}

// Adds the time of a collective call to the comm's exposed communication
// when the call blocks the thread that computes (the CPU backends).
class ExposedTimer {
public:
  explicit ExposedTimer(fsdprt_comm *c)
      : c_(c->host_blocks() ? c : nullptr),
        t0_(c_ ? std::chrono::steady_clock::now()
               : std::chrono::steady_clock::time_point()) {}
  ~ExposedTimer() {
    if (c_)
      c_->stat_exposed_ns.fetch_add(
          uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - t0_)
                       .count()),
          std::memory_order_relaxed);
  }

private:
  fsdprt_comm *c_;
  std::chrono::steady_clock::time_point t0_;
};

fsdprt_status_t fail(fsdprt_comm *c, const Status &st) {
  c->record_error(st);
  return st.code;
}

// Runs (request == nullptr) or starts a collective.
fsdprt_status_t collective(fsdprt_comm *c, const Desc &d, const void *send,
                           void *recv, fsdprt_request_t *request) {
  if (request)
    *request = nullptr;
  if (!c)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  Status st = validate(c, d, send, recv);
  Desc desc = d;
  if (st.ok())
    finish_members(&desc);
  const bool through_scratch = desc.n_members > 1 && !c->native_member_layout();
  if (st.ok() && through_scratch && !c->host_buffers())
    st = Status(FSDPRT_ERR_UNSUPPORTED,
                format("rank %lld: %s: this backend has no member layouts "
                       "(neither natively nor on host buffers)",
                       (long long)c->rank, kind_name(d.kind)));
  if (!st.ok()) {
    c->abort(st); // peers would otherwise wait for this rank until timeout
    return fail(c, st);
  }
  try {
    count_stats(c, desc);
    ExposedTimer timer(c);
    if (through_scratch) {
      fsdprt_request *req = nullptr;
      st = members_through_scratch(c, desc, send, recv,
                                   request ? &req : nullptr);
      if (st.ok() && request)
        *request = req;
    } else if (!request) {
      st = c->run(desc, send, recv);
    } else {
      fsdprt_request *req = nullptr;
      st = c->start(desc, send, recv, &req);
      if (st.ok())
        *request = req;
    }
  } catch (const std::bad_alloc &) {
    st = Status(FSDPRT_ERR_OUT_OF_MEMORY,
                format("rank %lld: out of memory in %s", (long long)c->rank,
                       kind_name(d.kind)));
    c->abort(st);
  }
  if (!st.ok())
    return fail(c, st);
  return FSDPRT_OK;
}

Desc make_desc(int32_t kind, int64_t mask, int64_t count, int32_t dtype,
               int32_t op) {
  Desc d;
  d.kind = kind;
  d.mask = mask;
  d.count = count;
  d.dtype = dtype;
  d.op = kind == FSDPRT_KIND_ALL_GATHER ? -1 : op;
  return d;
}

Desc make_members_desc(int32_t kind, int64_t mask, int64_t count, int32_t dtype,
                       int32_t op, int64_t n_members,
                       const int64_t *member_counts) {
  Desc d = make_desc(kind, mask, count, dtype, op);
  d.n_members = n_members;
  d.members = member_counts;
  return d;
}

fsdprt_comm *jit_comm(const char *entry) {
  fsdprt_comm *c = tls_comm;
  if (!c)
    record_process_error(
        FSDPRT_ERR_NO_COMM,
        format("%s called on a thread without a communicator (call "
               "fsdprt_set_thread_comm first)",
               entry));
  return c;
}

void jit_run(const char *entry, const Desc &d, void *send, void *recv) {
  fsdprt_comm *c = jit_comm(entry);
  if (!c || c->first_error() != FSDPRT_OK)
    return;
  if (collective(c, d, send, recv, nullptr) != FSDPRT_OK)
    c->jit_failed();
}

int64_t jit_start(const char *entry, const Desc &d, void *send, void *recv) {
  fsdprt_comm *c = jit_comm(entry);
  if (!c || c->first_error() != FSDPRT_OK)
    return 0;
  fsdprt_request_t req = nullptr;
  if (collective(c, d, send, recv, &req) != FSDPRT_OK || !req) {
    c->jit_failed();
    return 0;
  }
  int64_t handle = c->jit_next_handle++;
  c->jit_requests[handle] = req;
  return handle;
}

} // namespace

extern "C" {

fsdprt_status_t fsdprt_comm_destroy(fsdprt_comm_t *comm) {
  if (!comm || comm->backend == FSDPRT_BACKEND_THREADS)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  delete comm;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_backend(const fsdprt_comm_t *comm,
                                    fsdprt_backend_t *backend) {
  if (!comm || !backend)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *backend = comm->backend;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_rank(const fsdprt_comm_t *comm, int64_t *rank) {
  if (!comm || !rank)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *rank = comm->rank;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_size(const fsdprt_comm_t *comm, int64_t *size) {
  if (!comm || !size)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *size = comm->mesh.size;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_ndims(const fsdprt_comm_t *comm, int32_t *ndims) {
  if (!comm || !ndims)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *ndims = comm->mesh.ndims;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_shape(const fsdprt_comm_t *comm, int64_t *shape) {
  if (!comm || (!shape && comm->mesh.ndims > 0))
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  for (int i = 0; i < comm->mesh.ndims; ++i)
    shape[i] = comm->mesh.shape[i];
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_coords(const fsdprt_comm_t *comm, int64_t *coords) {
  if (!comm || (!coords && comm->mesh.ndims > 0))
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  comm->mesh.coords(comm->rank, coords);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_group(const fsdprt_comm_t *comm, int64_t group_mask,
                                  int64_t *group_size, int64_t *group_rank) {
  if (!comm || group_mask < 0 || group_mask >= comm->mesh.num_masks())
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  int64_t gr = 0;
  comm->mesh.group(comm->rank, group_mask, nullptr, &gr, nullptr);
  if (group_size)
    *group_size = comm->mesh.group_size(group_mask);
  if (group_rank)
    *group_rank = gr;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_error(const fsdprt_comm_t *comm) {
  return comm ? comm->first_error() : FSDPRT_ERR_INVALID_ARGUMENT;
}

const char *fsdprt_comm_error_message(const fsdprt_comm_t *comm) {
  return tls_copy(comm ? comm->first_error_message() : std::string());
}

const char *fsdprt_comm_last_error_message(const fsdprt_comm_t *comm) {
  return tls_copy(comm ? comm->last_error_message() : std::string());
}

fsdprt_status_t fsdprt_comm_record_error(fsdprt_comm_t *comm,
                                         fsdprt_status_t status,
                                         const char *message) {
  if (!comm || status == FSDPRT_OK)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  comm->record_error(
      Status(status, message ? message : fsdprt_status_string(status)));
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_get_last_error(void) { return last_error(); }

const char *fsdprt_get_last_error_message(void) {
  return last_error_message().c_str();
}

void fsdprt_clear_last_error(void) { clear_last_error(); }

fsdprt_status_t fsdprt_comm_get_async_error(const fsdprt_comm_t *comm,
                                            fsdprt_status_t *async_error) {
  if (!comm || !async_error)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *async_error = comm->async_error().code;
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_process_error(void) {
  std::lock_guard<std::mutex> lock(process_mu);
  return process_code;
}

const char *fsdprt_process_error_message(void) {
  std::string msg;
  {
    std::lock_guard<std::mutex> lock(process_mu);
    msg = process_msg;
  }
  return tls_copy(std::move(msg));
}

void fsdprt_process_error_clear(void) {
  std::lock_guard<std::mutex> lock(process_mu);
  process_code = FSDPRT_OK;
  process_msg.clear();
}

fsdprt_status_t fsdprt_all_gather(fsdprt_comm_t *comm, int64_t group_mask,
                                  const void *send, void *recv,
                                  int64_t send_count, int32_t dtype) {
  return collective(
      comm,
      make_desc(FSDPRT_KIND_ALL_GATHER, group_mask, send_count, dtype, -1),
      send, recv, nullptr);
}

fsdprt_status_t fsdprt_reduce_scatter(fsdprt_comm_t *comm, int64_t group_mask,
                                      const void *send, void *recv,
                                      int64_t recv_count, int32_t dtype,
                                      int32_t op) {
  return collective(
      comm,
      make_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask, recv_count, dtype, op),
      send, recv, nullptr);
}

fsdprt_status_t fsdprt_all_reduce(fsdprt_comm_t *comm, int64_t group_mask,
                                  const void *send, void *recv, int64_t count,
                                  int32_t dtype, int32_t op) {
  return collective(
      comm, make_desc(FSDPRT_KIND_ALL_REDUCE, group_mask, count, dtype, op),
      send, recv, nullptr);
}

fsdprt_status_t fsdprt_all_gather_async(fsdprt_comm_t *comm, int64_t group_mask,
                                        const void *send, void *recv,
                                        int64_t send_count, int32_t dtype,
                                        fsdprt_request_t *request) {
  if (!request)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  return collective(
      comm,
      make_desc(FSDPRT_KIND_ALL_GATHER, group_mask, send_count, dtype, -1),
      send, recv, request);
}

fsdprt_status_t fsdprt_reduce_scatter_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t recv_count, int32_t dtype, int32_t op, fsdprt_request_t *request) {
  if (!request)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  return collective(
      comm,
      make_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask, recv_count, dtype, op),
      send, recv, request);
}

fsdprt_status_t fsdprt_all_reduce_async(fsdprt_comm_t *comm, int64_t group_mask,
                                        const void *send, void *recv,
                                        int64_t count, int32_t dtype,
                                        int32_t op, fsdprt_request_t *request) {
  if (!request)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  return collective(
      comm, make_desc(FSDPRT_KIND_ALL_REDUCE, group_mask, count, dtype, op),
      send, recv, request);
}

fsdprt_status_t fsdprt_all_gather_members(fsdprt_comm_t *comm,
                                          int64_t group_mask, const void *send,
                                          void *recv, int64_t send_count,
                                          int32_t dtype, int64_t n_members,
                                          const int64_t *member_counts) {
  return collective(comm,
                    make_members_desc(FSDPRT_KIND_ALL_GATHER, group_mask,
                                      send_count, dtype, -1, n_members,
                                      member_counts),
                    send, recv, nullptr);
}

fsdprt_status_t fsdprt_reduce_scatter_members(fsdprt_comm_t *comm,
                                              int64_t group_mask,
                                              const void *send, void *recv,
                                              int64_t recv_count, int32_t dtype,
                                              int32_t op, int64_t n_members,
                                              const int64_t *member_counts) {
  return collective(comm,
                    make_members_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask,
                                      recv_count, dtype, op, n_members,
                                      member_counts),
                    send, recv, nullptr);
}

fsdprt_status_t fsdprt_all_gather_members_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t send_count, int32_t dtype, int64_t n_members,
    const int64_t *member_counts, fsdprt_request_t *request) {
  if (!request)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  return collective(comm,
                    make_members_desc(FSDPRT_KIND_ALL_GATHER, group_mask,
                                      send_count, dtype, -1, n_members,
                                      member_counts),
                    send, recv, request);
}

fsdprt_status_t fsdprt_reduce_scatter_members_async(
    fsdprt_comm_t *comm, int64_t group_mask, const void *send, void *recv,
    int64_t recv_count, int32_t dtype, int32_t op, int64_t n_members,
    const int64_t *member_counts, fsdprt_request_t *request) {
  if (!request)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  return collective(comm,
                    make_members_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask,
                                      recv_count, dtype, op, n_members,
                                      member_counts),
                    send, recv, request);
}

fsdprt_status_t fsdprt_wait(fsdprt_request_t *request) {
  if (!request)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  fsdprt_request *req = *request;
  if (!req)
    return FSDPRT_OK;
  fsdprt_comm *c = req->comm;
  Status st;
  {
    ExposedTimer timer(c);
    st = complete(c, req, nullptr);
  }
  delete req;
  *request = nullptr;
  if (!st.ok())
    return fail(c, st);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_test(fsdprt_request_t *request, int *done) {
  if (!request || !done)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  fsdprt_request *req = *request;
  if (!req) {
    *done = 1;
    return FSDPRT_OK;
  }
  fsdprt_comm *c = req->comm;
  bool finished = false;
  Status st = complete(c, req, &finished);
  *done = finished ? 1 : 0;
  if (!finished)
    return FSDPRT_OK;
  delete req;
  *request = nullptr;
  if (!st.ok())
    return fail(c, st);
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_get_stats(const fsdprt_comm_t *comm,
                                      fsdprt_stats_t *stats) {
  if (!comm || !stats)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *stats = fsdprt_stats_t();
  comm->collect_exposed();
  stats->exposed_ns = comm->stat_exposed_ns.load(std::memory_order_relaxed);
  for (int k = 0; k < FSDPRT_NUM_KINDS; ++k) {
    stats->calls[k] = comm->stat_calls[k].load(std::memory_order_relaxed);
    stats->bytes_sent[k] = comm->stat_sent[k].load(std::memory_order_relaxed);
    stats->bytes_received[k] =
        comm->stat_received[k].load(std::memory_order_relaxed);
    stats->total_calls += stats->calls[k];
    stats->total_bytes_sent += stats->bytes_sent[k];
    stats->total_bytes_received += stats->bytes_received[k];
  }
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_comm_reset_stats(fsdprt_comm_t *comm) {
  if (!comm)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  comm->collect_exposed();
  comm->stat_exposed_ns.store(0, std::memory_order_relaxed);
  for (int k = 0; k < FSDPRT_NUM_KINDS; ++k) {
    comm->stat_calls[k].store(0, std::memory_order_relaxed);
    comm->stat_sent[k].store(0, std::memory_order_relaxed);
    comm->stat_received[k].store(0, std::memory_order_relaxed);
  }
  return FSDPRT_OK;
}

void fsdprt_set_thread_comm(fsdprt_comm_t *comm) {
  tls_comm = comm;
  if (comm)
    comm->attach_thread();
}

fsdprt_comm_t *fsdprt_get_thread_comm(void) { return tls_comm; }

void fsdprt_jit_all_gather(void *send, void *recv, int64_t send_count,
                           int32_t dtype, int64_t group_mask) {
  jit_run("fsdprt_jit_all_gather",
          make_desc(FSDPRT_KIND_ALL_GATHER, group_mask, send_count, dtype, -1),
          send, recv);
}

void fsdprt_jit_reduce_scatter(void *send, void *recv, int64_t recv_count,
                               int32_t dtype, int32_t op, int64_t group_mask) {
  jit_run(
      "fsdprt_jit_reduce_scatter",
      make_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask, recv_count, dtype, op),
      send, recv);
}

void fsdprt_jit_all_reduce(void *send, void *recv, int64_t count, int32_t dtype,
                           int32_t op, int64_t group_mask) {
  jit_run("fsdprt_jit_all_reduce",
          make_desc(FSDPRT_KIND_ALL_REDUCE, group_mask, count, dtype, op), send,
          recv);
}

int64_t fsdprt_jit_all_gather_start(void *send, void *recv, int64_t send_count,
                                    int32_t dtype, int64_t group_mask) {
  return jit_start(
      "fsdprt_jit_all_gather_start",
      make_desc(FSDPRT_KIND_ALL_GATHER, group_mask, send_count, dtype, -1),
      send, recv);
}

int64_t fsdprt_jit_reduce_scatter_start(void *send, void *recv,
                                        int64_t recv_count, int32_t dtype,
                                        int32_t op, int64_t group_mask) {
  return jit_start(
      "fsdprt_jit_reduce_scatter_start",
      make_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask, recv_count, dtype, op),
      send, recv);
}

int64_t fsdprt_jit_all_reduce_start(void *send, void *recv, int64_t count,
                                    int32_t dtype, int32_t op,
                                    int64_t group_mask) {
  return jit_start(
      "fsdprt_jit_all_reduce_start",
      make_desc(FSDPRT_KIND_ALL_REDUCE, group_mask, count, dtype, op), send,
      recv);
}

void fsdprt_jit_all_gather_members(void *send, void *recv, int64_t send_count,
                                   int32_t dtype, int64_t group_mask,
                                   int64_t n_members,
                                   const int64_t *member_counts) {
  jit_run("fsdprt_jit_all_gather_members",
          make_members_desc(FSDPRT_KIND_ALL_GATHER, group_mask, send_count,
                            dtype, -1, n_members, member_counts),
          send, recv);
}

int64_t fsdprt_jit_all_gather_members_start(void *send, void *recv,
                                            int64_t send_count, int32_t dtype,
                                            int64_t group_mask,
                                            int64_t n_members,
                                            const int64_t *member_counts) {
  return jit_start("fsdprt_jit_all_gather_members_start",
                   make_members_desc(FSDPRT_KIND_ALL_GATHER, group_mask,
                                     send_count, dtype, -1, n_members,
                                     member_counts),
                   send, recv);
}

void fsdprt_jit_reduce_scatter_members(void *send, void *recv,
                                       int64_t recv_count, int32_t dtype,
                                       int32_t op, int64_t group_mask,
                                       int64_t n_members,
                                       const int64_t *member_counts) {
  jit_run("fsdprt_jit_reduce_scatter_members",
          make_members_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask, recv_count,
                            dtype, op, n_members, member_counts),
          send, recv);
}

int64_t fsdprt_jit_reduce_scatter_members_start(
    void *send, void *recv, int64_t recv_count, int32_t dtype, int32_t op,
    int64_t group_mask, int64_t n_members, const int64_t *member_counts) {
  return jit_start("fsdprt_jit_reduce_scatter_members_start",
                   make_members_desc(FSDPRT_KIND_REDUCE_SCATTER, group_mask,
                                     recv_count, dtype, op, n_members,
                                     member_counts),
                   send, recv);
}

void fsdprt_jit_wait(int64_t handle) {
  if (handle == 0)
    return; // the start failed and was already recorded
  fsdprt_comm *c = jit_comm("fsdprt_jit_wait");
  if (!c)
    return;
  auto it = c->jit_requests.find(handle);
  if (it == c->jit_requests.end()) {
    c->record_error(Status(
        FSDPRT_ERR_INVALID_ARGUMENT,
        format("rank %lld: invalid argument: fsdprt_jit_wait: unknown or "
               "already waited handle %lld",
               (long long)c->rank, (long long)handle)));
    return;
  }
  fsdprt_request_t req = it->second;
  c->jit_requests.erase(it);
  if (fsdprt_wait(&req) != FSDPRT_OK) // records a failure on the comm
    c->jit_failed();
}

int64_t fsdprt_jit_pending(fsdprt_comm_t *comm) {
  return comm ? int64_t(comm->jit_requests.size()) : 0;
}

void fsdprt_jit_guard(int32_t ok, const char *message) {
  if (ok)
    return;
  fsdprt_comm *c = jit_comm("fsdprt_jit_guard");
  if (!c || c->first_error() != FSDPRT_OK)
    return;
  Status st(FSDPRT_ERR_INVALID_ARGUMENT,
            format("rank %lld: %s", (long long)c->rank,
                   message ? message : "a run-time check of the step failed"));
  c->record_error(st);
  // Peers may be about to wait for this rank in a collective it will not
  // run: fail them too (their message names this error).
  c->abort(st);
  c->jit_failed();
}

int64_t fsdprt_jit_axis_index(int64_t group_mask) {
  fsdprt_comm *c = jit_comm("fsdprt_jit_axis_index");
  if (!c)
    return 0;
  if (group_mask < 0 || group_mask >= c->mesh.num_masks()) {
    if (c->first_error() != FSDPRT_OK)
      return 0;
    Status st(FSDPRT_ERR_INVALID_ARGUMENT,
              format("rank %lld: invalid argument: axis_index: group mask "
                     "%lld selects axes outside the %d-axis mesh",
                     (long long)c->rank, (long long)group_mask,
                     (int)c->mesh.ndims));
    c->record_error(st);
    c->abort(st);
    c->jit_failed();
    return 0;
  }
  int64_t group_rank = 0;
  c->mesh.group(c->rank, group_mask, nullptr, &group_rank, nullptr);
  return group_rank;
}

} // extern "C"
