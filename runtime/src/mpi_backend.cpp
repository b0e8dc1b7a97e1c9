// mpi backend: one process per rank over MPI_COMM_WORLD.
//
// One pair of sub-communicators per group mask is split once at creation
// (the split is collective over the world, so it cannot be done lazily
// when only some ranks use a mask). Every collective first exchanges its
// descriptor with point-to-point messages on the group's communicator, so
// a mismatch is reported before any data moves and a missing rank is
// identified by name. The data then moves with nonblocking MPI collectives
// in sequence order, polled with MPI_Test so that a timeout can fire.
// Reductions use an all-to-all and reduce locally in group-rank order
// (all_reduce: then an all-gather of the reduced chunks), which gives the
// same bits as the threads backend for every dtype, bf16/f16 included.
#include "common.h"
#include "kernels.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sched.h>
#include <thread>
#include <unistd.h>

namespace fsdprt {
namespace {

constexpr int kDescTag = 0x4653;  // descriptors, on the group's comm
constexpr int kAbortTag = 0x4654; // abort notices, on the world comm
constexpr int kAbortBytes = 1024;

// Set when a collective of any communicator of this process failed or was
// aborted; the exit handler then ends the job with MPI_Abort.
std::atomic<bool> job_failed{false};

// Abort notice: the failing collective (mask -1: none) and its message,
// so members of the same collective report the same status and message.
struct AbortNotice {
  int32_t code;
  int32_t pad;
  int64_t mask;
  int64_t group_id;
  uint64_t seq;
  char message[kAbortBytes - 32];
};
static_assert(sizeof(AbortNotice) == kAbortBytes, "abort notice size");

// MPI_Init_thread, the world-wide MPI_Comm_dup/MPI_Comm_split of a new
// communicator and MPI_Finalize block until every peer process takes part,
// with no timeout of their own: a peer that is stopped, died or never
// reached them would keep this process waiting forever. A Watchdog armed
// around such a call ends the process after `seconds` (no timeout when
// <= 0) with an error naming the rank and the call; the launcher (mpirun)
// then ends the rest of the job, the stopped peer included. MPI_Abort
// cannot be used: MPI may not be initialized yet, or be inside the call.
class Watchdog {
public:
  Watchdog(double seconds, const char *what) {
    if (!(seconds > 0))
      return;
    thread_ = std::thread([this, seconds, what] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                       [this] { return done_; }))
        return;
      std::fprintf(stderr,
                   "fsdprt: error: rank %s: timeout after %.3g s in %s: a "
                   "peer process is stopped, died or did not start\n",
                   rank_name().c_str(), seconds, what);
      std::fflush(stderr);
      _exit(1);
    });
  }
  ~Watchdog() {
    if (!thread_.joinable())
      return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  // This process's rank: from MPI when it is initialized, else from the
  // launcher's environment.
  static std::string rank_name() {
    int initialized = 0, finalized = 0, rank = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized &&
        MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS)
      return std::to_string(rank);
    for (const char *var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
      if (const char *v = std::getenv(var))
        return v;
    return "?";
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The longest timeout of the communicators created so far: MPI_Finalize's.
double finalize_timeout_s = 0;

std::string mpi_error(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
    return format("MPI error %d", rc);
  return std::string(buf, size_t(len));
}

MPI_Datatype elem_type(size_t es) {
  switch (es) {
  case 1:
    return MPI_UINT8_T;
  case 2:
    return MPI_UINT16_T;
  case 4:
    return MPI_UINT32_T;
  default:
    return MPI_UINT64_T;
  }
}

// Receive buffers of the reductions' all-to-all phases, kept across steps:
// a fresh buffer per collective cost a zero fill and tens of thousands of
// page faults per step at GPT-2 size. A step posts the same sizes every
// time, so after the first step every acquire finds a free buffer.
class ScratchPool {
public:
  // The smallest free buffer of at least `bytes` (64-byte aligned); else a
  // free smaller one grown, else a new one. Null when out of memory.
  char *acquire(size_t bytes) {
    Buf *fit = nullptr, *grow = nullptr;
    for (Buf &b : bufs_) {
      if (b.busy)
        continue;
      if (b.size >= bytes && (!fit || b.size < fit->size))
        fit = &b;
      if (b.size < bytes && (!grow || b.size > grow->size))
        grow = &b;
    }
    if (!fit && grow) {
      grow->data.reset();
      grow->size = 0;
      char *p = alloc(bytes);
      if (!p)
        return nullptr;
      grow->data.reset(p);
      grow->size = bytes;
      fit = grow;
    }
    if (!fit) {
      char *p = alloc(bytes);
      if (!p)
        return nullptr;
      bufs_.push_back({std::unique_ptr<char, Free>(p), bytes, false});
      fit = &bufs_.back();
    }
    fit->busy = true;
    return fit->data.get();
  }
  void release(char *p) {
    for (Buf &b : bufs_)
      if (b.data.get() == p)
        b.busy = false;
  }
  // A failed request's buffer stays busy (MPI may still write to it)
  // until the communicator is destroyed.

private:
  struct Free {
    void operator()(char *p) const { std::free(p); }
  };
  static char *alloc(size_t bytes) {
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) & ~size_t(63);
    return static_cast<char *>(std::aligned_alloc(64, rounded));
  }
  struct Buf {
    std::unique_ptr<char, Free> data;
    size_t size = 0;
    bool busy = false;
  };
  std::vector<Buf> bufs_;
};

struct Sub {
  MPI_Comm main = MPI_COMM_NULL;   // descriptors and first data phase
  MPI_Comm phase2 = MPI_COMM_NULL; // all_reduce's all-gather phase
  int k = 1;
  int member = 0;
  int64_t mask = 0, id = 0;
  std::vector<int64_t> ranks;
  std::string name;         // "{axes: shard}"
  std::string members;      // "group ranks 0,1,2,3"
  uint64_t next_seq = 0;    // next collective posted on this group
  uint64_t next_start = 0;  // next collective whose data phase may start
  uint64_t next_ar = 0;     // all_reduce ordinal counter
  uint64_t next_phase2 = 0; // next all_reduce ordinal allowed into phase 2
};

enum class State { Exchanging, Ready, Phase1, Phase2Ready, Phase2, Done };

struct MpiRequest : fsdprt_request {
  Sub *sub = nullptr;
  uint64_t seq = 0;
  uint64_t ar_ordinal = 0;
  Desc desc;
  const void *send = nullptr;
  void *recv = nullptr;
  State state = State::Exchanging;
  Status result;
  bool failed = false;

  std::vector<Desc> descs;           // one per member (own included)
  std::unique_ptr<Desc> sent;        // buffer of the descriptor sends
  std::vector<MPI_Request> send_req; // descriptor sends
  std::vector<MPI_Request> recv_req; // descriptor receives, by member
  MPI_Request data_req = MPI_REQUEST_NULL;
  char *tmp = nullptr; // all-to-all receive buffer (peers' chunks), pooled
  std::vector<int> counts, displs; // all_reduce chunking (elements)
  bool done() const { return state == State::Done || failed; }
};

class MpiComm : public fsdprt_comm {
public:
  ~MpiComm() override;
  Status init();

  Status start(const Desc &desc, const void *send, void *recv,
               fsdprt_request **request) override;
  Status wait(fsdprt_request *request) override;
  Status test(fsdprt_request *request, bool *done) override;
  void abort(const Status &cause) override { abort_for(cause, nullptr, 0); }
  void jit_failed() override;

private:
  Status check(int rc, const char *what);
  void progress();
  void advance(MpiRequest *r);
  void advance_exchange(MpiRequest *r);
  void advance_start(MpiRequest *r);
  Status start_peer_chunks(MpiRequest *r, MPI_Datatype type,
                           std::vector<int> counts, const int *displs,
                           int chunk);
  void advance_phase1(MpiRequest *r);
  void advance_phase2_start(MpiRequest *r);
  void advance_phase2(MpiRequest *r);
  void fail(MpiRequest *r, const Status &st);
  /// A data-phase MPI error: the request fails and so does the world, since
  /// peers are already inside the collective.
  void fail_and_abort(MpiRequest *r, const Status &st) {
    fail(r, st);
    abort(st);
  }
  void release(MpiRequest *r);
  Status out_of_memory(const MpiRequest *r) const;
  void abort_for(const Status &cause, const Sub *sub, uint64_t seq);
  bool poll_abort();
  Status aborted_status(const MpiRequest *r = nullptr) const;
  std::string timeout_message(MpiRequest *r, double waited);
  void forget(MpiRequest *r);
  void park_sends(MpiRequest *r);

  // Descriptor sends that had not completed when their request finished:
  // kept (with their buffer) until they complete.
  struct PendingSends {
    std::unique_ptr<Desc> buffer;
    std::vector<MPI_Request> requests;
  };
  std::vector<PendingSends> pending_sends_;

  MPI_Comm world_ = MPI_COMM_NULL;
  std::vector<Sub> subs_;
  std::vector<MpiRequest *> outstanding_;
  ScratchPool scratch_;

  bool aborted_ = false;
  Status abort_cause_;
  int64_t abort_mask_ = -1, abort_group_ = -1;
  uint64_t abort_seq_ = 0;
  MPI_Request abort_recv_ = MPI_REQUEST_NULL;
  AbortNotice abort_in_ = {};
  std::vector<MPI_Request> abort_sends_;
  std::unique_ptr<AbortNotice> abort_out_;
};

Status MpiComm::check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return Status::Ok();
  return Status(FSDPRT_ERR_BACKEND,
                format("rank %lld: %s failed: %s", (long long)rank, what,
                       mpi_error(rc).c_str()));
}

Status MpiComm::init() {
  Status st = check(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup");
  if (!st.ok())
    return st;
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  subs_.resize(size_t(mesh.num_masks()));
  for (int64_t mask = 0; mask < mesh.num_masks(); ++mask) {
    Sub &s = subs_[size_t(mask)];
    int64_t gr = 0, gid = 0;
    mesh.group(rank, mask, &s.ranks, &gr, &gid);
    s.mask = mask;
    s.id = gid;
    s.k = int(s.ranks.size());
    s.member = int(gr);
    s.name = mesh.group_axes(mask);
    s.members = "group ranks " + join_ranks(s.ranks);
    st = check(MPI_Comm_split(world_, int(gid), int(gr), &s.main),
               "MPI_Comm_split");
    if (!st.ok())
      return st;
    st = check(MPI_Comm_split(world_, int(gid), int(gr), &s.phase2),
               "MPI_Comm_split");
    if (!st.ok())
      return st;
    MPI_Comm_set_errhandler(s.main, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(s.phase2, MPI_ERRORS_RETURN);
  }
  return check(MPI_Irecv(&abort_in_, kAbortBytes, MPI_BYTE, MPI_ANY_SOURCE,
                         kAbortTag, world_, &abort_recv_),
               "MPI_Irecv");
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  if (abort_recv_ != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Test(&abort_recv_, &flag, MPI_STATUS_IGNORE);
    if (!flag) {
      MPI_Cancel(&abort_recv_);
      MPI_Wait(&abort_recv_, MPI_STATUS_IGNORE);
    }
  }
  int sent = 1;
  if (!abort_sends_.empty())
    MPI_Testall(int(abort_sends_.size()), abort_sends_.data(), &sent,
                MPI_STATUSES_IGNORE);
  if (!sent) {
    for (MPI_Request &q : abort_sends_)
      if (q != MPI_REQUEST_NULL)
        MPI_Request_free(&q);
    abort_out_.release(); // may still be read by a freed send
  }
  for (auto &p : pending_sends_) {
    for (MPI_Request &q : p.requests)
      if (q != MPI_REQUEST_NULL)
        MPI_Request_free(&q);
    p.buffer.release(); // may still be read by a freed send
  }
  // After an abort peers may still have operations in flight on these
  // communicators; freeing them then is not safe, so they are left alone.
  if (aborted_)
    return;
  for (Sub &s : subs_) {
    if (s.main != MPI_COMM_NULL)
      MPI_Comm_free(&s.main);
    if (s.phase2 != MPI_COMM_NULL)
      MPI_Comm_free(&s.phase2);
  }
  if (world_ != MPI_COMM_NULL)
    MPI_Comm_free(&world_);
}

bool MpiComm::poll_abort() {
  if (aborted_)
    return true;
  if (abort_recv_ == MPI_REQUEST_NULL)
    return false;
  int flag = 0;
  MPI_Test(&abort_recv_, &flag, MPI_STATUS_IGNORE);
  if (!flag)
    return false;
  abort_in_.message[sizeof(abort_in_.message) - 1] = '\0';
  aborted_ = true;
  job_failed = true;
  abort_cause_ = Status(fsdprt_status_t(abort_in_.code), abort_in_.message);
  abort_mask_ = abort_in_.mask;
  abort_group_ = abort_in_.group_id;
  abort_seq_ = abort_in_.seq;
  return true;
}

Status MpiComm::aborted_status(const MpiRequest *r) const {
  // Members of the failing collective share its status and message.
  if (r && r->sub && abort_mask_ == r->sub->mask &&
      abort_group_ == r->sub->id && abort_seq_ == r->seq)
    return abort_cause_;
  return Status(FSDPRT_ERR_ABORTED,
                format("rank %lld: aborted: %s", (long long)rank,
                       abort_cause_.message.c_str()));
}

void MpiComm::abort_for(const Status &cause, const Sub *sub, uint64_t seq) {
  if (aborted_)
    return;
  aborted_ = true;
  job_failed = true;
  abort_cause_ = cause;
  abort_mask_ = sub ? sub->mask : -1;
  abort_group_ = sub ? sub->id : -1;
  abort_seq_ = seq;
  // Tell every other rank; they poll for this while they wait.
  abort_out_.reset(new AbortNotice());
  std::memset(abort_out_.get(), 0, sizeof(AbortNotice));
  abort_out_->code = int32_t(cause.code);
  abort_out_->mask = abort_mask_;
  abort_out_->group_id = abort_group_;
  abort_out_->seq = seq;
  std::strncpy(abort_out_->message, cause.message.c_str(),
               sizeof(abort_out_->message) - 1);
  for (int r = 0; r < int(mesh.size); ++r) {
    if (r == int(rank))
      continue;
    MPI_Request q = MPI_REQUEST_NULL;
    if (MPI_Isend(abort_out_.get(), kAbortBytes, MPI_BYTE, r, kAbortTag, world_,
                  &q) == MPI_SUCCESS)
      abort_sends_.push_back(q);
  }
}

// Cancels what can be cancelled of a failed request so that it leaves no
// pending point-to-point operations behind.
void MpiComm::release(MpiRequest *r) {
  for (MPI_Request &q : r->recv_req) {
    if (q == MPI_REQUEST_NULL)
      continue;
    int flag = 0;
    MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
    if (!flag) {
      MPI_Cancel(&q);
      MPI_Wait(&q, MPI_STATUS_IGNORE);
    }
  }
  park_sends(r);
}

void MpiComm::park_sends(MpiRequest *r) {
  int flag = 0;
  if (r->send_req.empty())
    return;
  MPI_Testall(int(r->send_req.size()), r->send_req.data(), &flag,
              MPI_STATUSES_IGNORE);
  if (!flag)
    pending_sends_.push_back({std::move(r->sent), std::move(r->send_req)});
  r->send_req.clear();
  // Retire parked sends that have completed meanwhile.
  for (size_t i = 0; i < pending_sends_.size();) {
    auto &p = pending_sends_[i];
    MPI_Testall(int(p.requests.size()), p.requests.data(), &flag,
                MPI_STATUSES_IGNORE);
    if (flag) {
      pending_sends_.erase(pending_sends_.begin() + long(i));
    } else {
      ++i;
    }
  }
}

void MpiComm::fail(MpiRequest *r, const Status &st) {
  if (r->failed)
    return;
  r->failed = true;
  r->result = st;
  if (r->state == State::Exchanging)
    release(r);
}

// Exchanging: every member's descriptor has arrived and they all agree.
void MpiComm::advance_exchange(MpiRequest *r) {
  Sub &s = *r->sub;
  int flag = 0;
  Status st = check(MPI_Testall(int(r->recv_req.size()), r->recv_req.data(),
                                &flag, MPI_STATUSES_IGNORE),
                    "MPI_Testall");
  if (!st.ok())
    return fail(r, st);
  if (!flag)
    return;
  park_sends(r);
  int bad = -1;
  for (int j = 1; j < s.k && bad < 0; ++j)
    if (r->descs[size_t(j)] != r->descs[0])
      bad = j;
  if (bad < 0) {
    r->state = State::Ready;
    return;
  }
  Status err(FSDPRT_ERR_DESYNC,
             format("desync in collective #%llu on group %s: rank %lld "
                    "called %s but rank %lld called %s (%s)",
                    (unsigned long long)(r->seq + 1), s.name.c_str(),
                    (long long)s.ranks[0], describe(r->descs[0]).c_str(),
                    (long long)s.ranks[size_t(bad)],
                    describe(r->descs[size_t(bad)]).c_str(),
                    s.members.c_str()));
  fail(r, err);
  abort_for(err, &s, r->seq);
}

// The reduction's receive buffer could not be allocated.
Status MpiComm::out_of_memory(const MpiRequest *r) const {
  const Sub &s = *r->sub;
  return Status(FSDPRT_ERR_OUT_OF_MEMORY,
                format("rank %lld: out of memory for the receive buffer of "
                       "collective #%llu %s on group %s",
                       (long long)rank, (unsigned long long)(r->seq + 1),
                       describe(r->desc).c_str(), s.name.c_str()));
}

// Where peer j's copy of my chunk lands in the receive buffer: the peers
// in group order, without my own (the reduction reads mine in place).
inline size_t peer_slot(int j, int me) { return size_t(j < me ? j : j - 1); }

// The reductions' first phase: every peer sends me its copy of my chunk
// (`chunk` elements; member j's chunk of a send buffer is `counts[j]`
// elements at `displs[j]`), into a pooled buffer.
Status MpiComm::start_peer_chunks(MpiRequest *r, MPI_Datatype type,
                                  std::vector<int> counts, const int *displs,
                                  int chunk) {
  const Sub &s = *r->sub;
  const int k = s.k, me = s.member;
  r->tmp = scratch_.acquire(size_t(k - 1) * size_t(chunk) *
                            fsdprt_dtype_size(r->desc.dtype));
  if (!r->tmp)
    return out_of_memory(r);
  std::vector<int> rcounts(static_cast<size_t>(k), chunk),
      rdispls(static_cast<size_t>(k), 0);
  counts[size_t(me)] = rcounts[size_t(me)] = 0;
  for (int j = 0; j < k; ++j)
    if (j != me)
      rdispls[size_t(j)] = int(peer_slot(j, me)) * chunk;
  return check(MPI_Ialltoallv(r->send, counts.data(), displs, type, r->tmp,
                              rcounts.data(), rdispls.data(), type, s.main,
                              &r->data_req),
               "starting the data exchange");
}

// Ready: start the data exchange once every earlier collective of the group
// has started (nonblocking collectives must start in the same order).
void MpiComm::advance_start(MpiRequest *r) {
  Sub &s = *r->sub;
  if (s.next_start != r->seq)
    return;
  const Desc &d = r->desc;
  const size_t es = fsdprt_dtype_size(d.dtype);
  const MPI_Datatype type = elem_type(es);
  const int m = int(d.count);
  Status st;
  if (d.kind == FSDPRT_KIND_ALL_GATHER) {
    const char *recv = static_cast<const char *>(r->recv);
    const void *sendp = r->send == recv + size_t(s.member) * size_t(m) * es
                            ? MPI_IN_PLACE
                            : r->send;
    st = check(
        MPI_Iallgather(sendp, m, type, r->recv, m, type, s.main, &r->data_req),
        "starting the data exchange");
  } else if (d.kind == FSDPRT_KIND_REDUCE_SCATTER) {
    // Member j's chunk is the j-th block of m elements.
    std::vector<int> displs(static_cast<size_t>(s.k));
    for (int j = 0; j < s.k; ++j)
      displs[size_t(j)] = j * m;
    st = start_peer_chunks(r, type, std::vector<int>(size_t(s.k), m),
                           displs.data(), m);
  } else {
    // all_reduce: member j reduces chunk j of the buffer (balanced chunks).
    const int b = m / s.k, rem = m % s.k;
    r->counts.resize(size_t(s.k));
    r->displs.resize(size_t(s.k));
    for (int j = 0; j < s.k; ++j) {
      r->counts[size_t(j)] = b + (j < rem ? 1 : 0);
      r->displs[size_t(j)] = j * b + std::min(j, rem);
    }
    st = start_peer_chunks(r, type, r->counts, r->displs.data(),
                           r->counts[size_t(s.member)]);
  }
  s.next_start++;
  if (!st.ok())
    return fail_and_abort(r, st);
  r->state = State::Phase1;
}

// Phase1: the first data phase completed; reduce what arrived locally in
// group-rank order.
void MpiComm::advance_phase1(MpiRequest *r) {
  int flag = 0;
  Status st =
      check(MPI_Test(&r->data_req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (!st.ok())
    return fail_and_abort(r, st);
  if (!flag)
    return;
  const Desc &d = r->desc;
  if (d.kind == FSDPRT_KIND_ALL_GATHER) {
    r->state = State::Done;
    return;
  }
  const int k = r->sub->k, me = r->sub->member;
  const size_t es = fsdprt_dtype_size(d.dtype);
  const bool rs = d.kind == FSDPRT_KIND_REDUCE_SCATTER;
  const int n = rs ? int(d.count) : r->counts[size_t(me)];
  std::vector<const void *> srcs(static_cast<size_t>(k));
  // Group-rank order, my own chunk in place: the threads backend's bits.
  const char *own =
      static_cast<const char *>(r->send) +
      size_t(rs ? int64_t(me) * d.count : r->displs[size_t(me)]) * es;
  for (int j = 0; j < k; ++j)
    srcs[size_t(j)] =
        j == me ? own : r->tmp + peer_slot(j, me) * size_t(n) * es;
  void *dst =
      rs ? r->recv
         : static_cast<char *>(r->recv) + size_t(r->displs[size_t(me)]) * es;
  reduce_elems(&dst, 1, srcs.data(), k, n, d.dtype, d.op);
  if (!rs) {
    r->state = State::Phase2Ready;
    return;
  }
  r->state = State::Done;
  scratch_.release(r->tmp);
  r->tmp = nullptr;
}

// Phase2Ready: all_reduce's all-gather of the reduced chunks, in all_reduce
// order on the group's second communicator.
void MpiComm::advance_phase2_start(MpiRequest *r) {
  Sub &s = *r->sub;
  if (s.next_phase2 != r->ar_ordinal)
    return;
  s.next_phase2++;
  const MPI_Datatype type = elem_type(fsdprt_dtype_size(r->desc.dtype));
  Status st =
      check(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, r->recv, r->counts.data(),
                            r->displs.data(), type, s.phase2, &r->data_req),
            "MPI_Iallgatherv");
  if (!st.ok())
    return fail_and_abort(r, st);
  r->state = State::Phase2;
}

// Phase2: the all-gather of the reduced chunks completed.
void MpiComm::advance_phase2(MpiRequest *r) {
  int flag = 0;
  Status st =
      check(MPI_Test(&r->data_req, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (!st.ok())
    return fail_and_abort(r, st);
  if (flag) {
    r->state = State::Done;
    scratch_.release(r->tmp);
    r->tmp = nullptr;
  }
}

// Moves a request through as many states as it can without blocking.
void MpiComm::advance(MpiRequest *r) {
  using Step = void (MpiComm::*)(MpiRequest *);
  static const std::pair<State, Step> steps[] = {
      {State::Exchanging, &MpiComm::advance_exchange},
      {State::Ready, &MpiComm::advance_start},
      {State::Phase1, &MpiComm::advance_phase1},
      {State::Phase2Ready, &MpiComm::advance_phase2_start},
      {State::Phase2, &MpiComm::advance_phase2}};
  for (const auto &[state, step] : steps) {
    if (r->failed || r->state != state)
      continue;
    (this->*step)(r);
  }
}

// Compiled code cannot act on an error, and peers may wait for this rank
// forever (stopped, or in another collective): end the whole job now.
void MpiComm::jit_failed() {
  std::string msg = first_error_message();
  if (msg.rfind("rank ", 0) != 0)
    msg = format("rank %lld: %s", (long long)rank, msg.c_str());
  std::fprintf(stderr, "fsdprt: error: %s\n", msg.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void MpiComm::progress() {
  for (MpiRequest *r : outstanding_)
    if (!r->done())
      advance(r);
}

void MpiComm::forget(MpiRequest *r) {
  auto it = std::find(outstanding_.begin(), outstanding_.end(), r);
  if (it != outstanding_.end())
    outstanding_.erase(it);
}

Status MpiComm::start(const Desc &desc, const void *send, void *recv,
                      fsdprt_request **request) {
  if (poll_abort())
    return aborted_status();
  Sub &s = subs_[size_t(desc.mask)];
  const size_t es = fsdprt_dtype_size(desc.dtype);
  if (desc.count * int64_t(s.k) > int64_t(2147483647))
    return Status(FSDPRT_ERR_INVALID_ARGUMENT,
                  format("rank %lld: invalid argument: %s: count %lld is too "
                         "large for the mpi backend (int counts)",
                         (long long)rank, kind_name(desc.kind),
                         (long long)desc.count));
  auto r = std::make_unique<MpiRequest>();
  r->comm = this;
  r->sub = &s;
  r->desc = desc;
  r->send = send;
  r->recv = recv;
  if (s.k == 1) {
    copy_bytes(recv, send, size_t(desc.count) * es);
    r->state = State::Done;
    *request = r.release();
    return Status::Ok();
  }
  r->seq = s.next_seq++;
  if (desc.kind == FSDPRT_KIND_ALL_REDUCE)
    r->ar_ordinal = s.next_ar++;
  r->descs.assign(size_t(s.k), Desc());
  r->descs[size_t(s.member)] = desc;
  r->sent.reset(new Desc(desc));
  r->recv_req.assign(size_t(s.k), MPI_REQUEST_NULL);
  for (int j = 0; j < s.k; ++j) {
    if (j == s.member)
      continue;
    int rc = MPI_Irecv(&r->descs[size_t(j)], int(sizeof(Desc)), MPI_BYTE, j,
                       kDescTag, s.main, &r->recv_req[size_t(j)]);
    Status st = check(rc, "MPI_Irecv");
    if (st.ok()) {
      MPI_Request q = MPI_REQUEST_NULL;
      st = check(MPI_Isend(r->sent.get(), int(sizeof(Desc)), MPI_BYTE, j,
                           kDescTag, s.main, &q),
                 "MPI_Isend");
      r->send_req.push_back(q);
    }
    if (!st.ok()) {
      release(r.get());
      abort(st);
      return st;
    }
  }
  outstanding_.push_back(r.get());
  // Every outstanding request, not only this one: an earlier collective
  // whose descriptors have all arrived starts its data phase here instead
  // of at its wait (MPI moves data only inside MPI calls).
  progress();
  *request = r.release();
  return Status::Ok();
}

std::string MpiComm::timeout_message(MpiRequest *r, double waited) {
  const Sub &s = *r->sub;
  std::string msg = format(
      "timeout after %.3g s in collective #%llu %s on group %s: ", waited,
      (unsigned long long)(r->seq + 1), describe(r->desc).c_str(),
      s.name.c_str());
  if (r->state == State::Exchanging) {
    std::vector<int64_t> missing;
    for (int j = 0; j < s.k; ++j) {
      if (j == s.member || r->recv_req[size_t(j)] == MPI_REQUEST_NULL)
        continue;
      int flag = 0;
      MPI_Test(&r->recv_req[size_t(j)], &flag, MPI_STATUS_IGNORE);
      if (!flag)
        missing.push_back(s.ranks[size_t(j)]);
    }
    if (!missing.empty())
      return msg + format("rank(s) %s did not call it (%s)",
                          join_ranks(missing).c_str(), s.members.c_str());
  }
  if (r->state == State::Ready)
    return msg + "an earlier collective on this group has not started (" +
           s.members + ")";
  return msg + "all ranks arrived but the data exchange did not complete (" +
         s.members + ")";
}

Status MpiComm::wait(fsdprt_request *request) {
  auto *r = static_cast<MpiRequest *>(request);
  const double t0 = now_s();
  const double timeout = options.timeout_s;
  int spins = 0;
  while (!r->done()) {
    progress();
    if (r->done())
      break;
    if (poll_abort()) {
      fail(r, aborted_status(r));
      break;
    }
    double waited = now_s() - t0;
    if (timeout > 0 && waited >= timeout) {
      Status err(FSDPRT_ERR_TIMEOUT, timeout_message(r, waited));
      fail(r, err);
      abort_for(err, r->sub, r->seq);
      break;
    }
    // Other ranks may share this core: poll, then give the core away.
    if (++spins > 64)
      sched_yield();
  }
  forget(r);
  return r->result;
}

Status MpiComm::test(fsdprt_request *request, bool *done) {
  auto *r = static_cast<MpiRequest *>(request);
  if (!r->done()) {
    progress();
    if (!r->done() && poll_abort())
      fail(r, aborted_status(r));
  }
  *done = r->done();
  if (*done)
    forget(r);
  return r->result;
}

bool we_initialized_mpi = false;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  // After a failed collective a peer may never reach MPI_Finalize (it is
  // stopped, or still waits in a collective), and MPI_Finalize would wait
  // for it: end the whole job instead.
  if (job_failed.load())
    MPI_Abort(MPI_COMM_WORLD, 1);
  Watchdog watchdog(finalize_timeout_s, "MPI_Finalize");
  MPI_Finalize();
}

} // namespace
} // namespace fsdprt

using namespace fsdprt;

extern "C" fsdprt_status_t
fsdprt_mpi_comm_create(int32_t ndims, const int64_t *shape,
                       const fsdprt_options_t *options, fsdprt_comm_t **comm) {
  if (!comm)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *comm = nullptr;
  Mesh mesh;
  Status st = Mesh::create(ndims, shape,
                           options ? options->axis_names : nullptr, &mesh);
  if (!st.ok())
    return st.code;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return fsdprt::fail_call(FSDPRT_ERR_BACKEND, __func__);
  Options resolved = resolve_options(options);
  finalize_timeout_s = std::max(finalize_timeout_s, resolved.timeout_s);
  if (!initialized) {
    int provided = 0;
    Watchdog watchdog(resolved.timeout_s, "MPI_Init_thread");
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
        MPI_SUCCESS)
      return fsdprt::fail_call(FSDPRT_ERR_BACKEND, __func__);
    if (!we_initialized_mpi) {
      we_initialized_mpi = true;
      std::atexit(finalize_at_exit);
    }
  }
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  // Every rank sees the same shape, so every rank returns here together.
  if (int64_t(world_size) != mesh.size)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  auto c = std::make_unique<MpiComm>();
  c->backend = FSDPRT_BACKEND_MPI;
  c->mesh = mesh;
  c->options = resolved;
  c->rank = world_rank;
  {
    Watchdog watchdog(resolved.timeout_s,
                      "creating the communicator (MPI_Comm_dup/MPI_Comm_split "
                      "over MPI_COMM_WORLD)");
    st = c->init();
  }
  if (!st.ok())
    return st.code;
  *comm = c.release();
  return FSDPRT_OK;
}
