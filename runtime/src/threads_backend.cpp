// threads backend: every rank is a thread of one process and all buffers
// are shared memory.
//
// Each group (mask, group id) owns a ring of slots, one per in-flight
// collective (per-group sequence number modulo kSlots). A rank posts its
// descriptor and buffer pointers into its entry of the slot. Once every
// member has posted, one member compares the descriptors (desync check) and
// the data movement is split into tasks of about kTaskBytes that any member
// inside a runtime call claims and runs: each task copies or reduces
// directly between the members' own buffers (no staging copies). Reductions
// combine the members' contributions in group-rank order, so results do not
// depend on which thread ran which task.
#include "common.h"
#include "kernels.h"
#include "sync.h"

#include <algorithm>
#include <map>
#include <memory>
#include <sched.h>
#include <thread>

namespace fsdprt {
namespace {

constexpr int kSlots = 16;
constexpr int64_t kTaskBytes = 256 * 1024;
constexpr int64_t kStreamBytes = 8 << 20;

// Tagged counter words: high 32 bits = tag of the op (seq + 1), low 32 bits
// = value. An older tag means the slot has not been used for this op yet.
inline uint32_t tag_of(uint64_t seq) { return uint32_t(seq + 1); }
inline int32_t tag_diff(uint64_t word, uint32_t tag) {
  return int32_t(uint32_t(word >> 32) - tag);
}
inline uint64_t make_word(uint32_t tag, uint32_t value) {
  return (uint64_t(tag) << 32) | value;
}

enum VerifyState : uint32_t { kVerifying = 1, kVerified = 2, kDesync = 3 };

struct alignas(64) Post {
  std::atomic<uint64_t> posted{0}; // seq + 1 of the latest posted op
  Desc desc;
  const void *send = nullptr;
  void *recv = nullptr;
  int64_t ntasks = 0;
};

struct Slot {
  alignas(64) std::atomic<uint64_t> verify{0};
  alignas(64) std::atomic<uint64_t> claim{0};
  alignas(64) std::atomic<uint64_t> finished{0};
  std::unique_ptr<Post[]> posts;
};

struct Group {
  int64_t mask = 0;
  int k = 1;
  std::vector<int64_t> ranks; // global rank of each member, in group order
  std::string name;           // "{axes: shard}"
  std::string members;        // "group ranks 0,1,2,3"
  Slot slots[kSlots];
};

bool op_complete(const Slot &s, uint32_t tag, int64_t ntasks) {
  uint64_t v = s.finished.load(std::memory_order_acquire);
  int32_t d = tag_diff(v, tag);
  return d > 0 || (d == 0 && int64_t(uint32_t(v)) >= ntasks);
}

// Claims the next task of the op, or returns -1 when all are claimed.
int64_t claim_task(Slot &s, uint32_t tag, int64_t ntasks) {
  uint64_t v = s.claim.load(std::memory_order_acquire);
  for (;;) {
    int32_t d = tag_diff(v, tag);
    uint64_t next;
    int64_t got;
    if (d == 0) {
      got = int64_t(uint32_t(v));
      if (got >= ntasks)
        return -1;
      next = v + 1;
    } else if (d < 0) {
      got = 0;
      next = make_word(tag, 1);
    } else {
      return -1;
    }
    if (s.claim.compare_exchange_weak(v, next, std::memory_order_acq_rel))
      return got;
  }
}

// Counts a finished task; true when it was the op's last one.
bool finish_task(Slot &s, uint32_t tag, int64_t ntasks) {
  uint64_t v = s.finished.load(std::memory_order_acquire);
  for (;;) {
    uint64_t next = tag_diff(v, tag) == 0 ? v + 1 : make_word(tag, 1);
    if (s.finished.compare_exchange_weak(v, next, std::memory_order_acq_rel))
      return int64_t(uint32_t(next)) == ntasks;
  }
}

// Number of tasks the op is split into (>= 1), same on every member.
int64_t task_count(const Desc &d, int64_t k) {
  int64_t es = int64_t(fsdprt_dtype_size(d.dtype));
  int64_t m = d.count;
  int64_t units = 0, per_task = 1;
  switch (d.kind) {
  case FSDPRT_KIND_ALL_GATHER: // source bytes, each written to k buffers
    units = k * m * es;
    per_task = std::max<int64_t>(4096, kTaskBytes / k);
    break;
  case FSDPRT_KIND_REDUCE_SCATTER: // output elements, destination-major
    units = k * m;
    per_task = std::max<int64_t>(64, kTaskBytes / (es * (k + 1))) & ~63;
    break;
  default: // output element ranges, written to every member
    units = m;
    per_task = std::max<int64_t>(64, kTaskBytes / (es * 2 * k)) & ~63;
    break;
  }
  int64_t n = (units + per_task - 1) / per_task;
  return n < 1 ? 1 : n;
}

// Member i of a member layout (offsets off[0..n], off[n] = count) that
// holds element e < count: the last i with off[i] <= e (skips empty ones).
inline int64_t member_of(const int64_t *off, int64_t n, int64_t e) {
  return int64_t(std::upper_bound(off, off + n + 1, e) - off) - 1;
}

// `off`: the member offsets of a member layout (d.n_members > 1), else
// nullptr.
void run_task(const Group &g, const Slot &s, const Desc &d, const int64_t *off,
              int64_t task, int64_t ntasks) {
  const int k = g.k;
  const int64_t es = int64_t(fsdprt_dtype_size(d.dtype));
  const int64_t m = d.count;
  const Post *posts = s.posts.get();
  thread_local std::vector<const void *> src_buf;
  thread_local std::vector<void *> dst_buf;
  src_buf.resize(size_t(k));
  dst_buf.resize(size_t(k));
  const void **srcs = src_buf.data();
  void **dsts = dst_buf.data();
  if (d.kind == FSDPRT_KIND_ALL_GATHER) {
    // Task t covers a byte range of one member's send buffer and writes it
    // to every member's receive buffer: the source is read once.
    const int64_t piece = m * es, total = k * piece;
    const int64_t per_task = (total + ntasks - 1) / ntasks;
    // Large gathers do not fit in cache: stream instead of polluting it.
    const bool streaming = total * k >= kStreamBytes;
    int64_t pos = task * per_task;
    const int64_t end = std::min(total, pos + per_task);
    while (pos < end) {
      const int64_t src = pos / piece, at = pos % piece;
      int64_t len = std::min(end - pos, piece - at);
      // Where byte `at` of a shard lands in a receive buffer: src's slot,
      // or with members src's piece of the member holding it.
      int64_t to = src * piece + at;
      if (off) {
        const int64_t i = member_of(off, d.n_members, at / es);
        len = std::min(len, off[i + 1] * es - at);
        to = (k * off[i] + src * (off[i + 1] - off[i])) * es +
             (at - off[i] * es);
      }
      const char *from = static_cast<const char *>(posts[src].send) + at;
      for (int j = 0; j < k; ++j)
        dsts[j] = static_cast<char *>(posts[j].recv) + to;
      copy_bytes_multi(dsts, k, from, size_t(len), streaming);
      pos += len;
    }
    return;
  }
  if (d.kind == FSDPRT_KIND_REDUCE_SCATTER) {
    const int64_t total = k * m;
    const int64_t per_task = (total + ntasks - 1) / ntasks;
    int64_t pos = task * per_task;
    const int64_t end = std::min(total, pos + per_task);
    while (pos < end) {
      const int64_t dst = pos / m, t0 = pos % m;
      int64_t len = std::min(end - pos, m - t0);
      // Element t0 of dst's output in every send buffer: slot dst, or with
      // members dst's slot of the member holding it.
      int64_t from = dst * m + t0;
      if (off) {
        const int64_t i = member_of(off, d.n_members, t0);
        len = std::min(len, off[i + 1] - t0);
        from = k * off[i] + dst * (off[i + 1] - off[i]) + (t0 - off[i]);
      }
      for (int j = 0; j < k; ++j)
        srcs[j] = static_cast<const char *>(posts[j].send) + from * es;
      dsts[0] = static_cast<char *>(posts[dst].recv) + t0 * es;
      reduce_elems(dsts, 1, srcs, k, len, d.dtype, d.op,
                   k * m * es >= kStreamBytes);
      pos += len;
    }
    return;
  }
  const int64_t per_task = (m + ntasks - 1) / ntasks;
  const int64_t a = task * per_task, b = std::min(m, a + per_task);
  if (a >= b)
    return;
  for (int j = 0; j < k; ++j) {
    srcs[j] = static_cast<const char *>(posts[j].send) + a * es;
    dsts[j] = static_cast<char *>(posts[j].recv) + a * es;
  }
  reduce_elems(dsts, k, srcs, k, b - a, d.dtype, d.op,
               k * m * es >= kStreamBytes);
}

class ThreadsWorld;

struct ThreadsRequest : fsdprt_request {
  Group *group = nullptr;
  int member = 0;
  uint64_t seq = 0;
  Desc desc;
  int64_t ntasks = 1;
  std::vector<int64_t> member_offsets; // member layouts: n_members + 1
  bool all_posted = false;
  bool done = false; // completed (data valid) or failed
  Status result;
};

struct GroupRef {
  Group *group = nullptr;
  int member = 0;
  uint64_t next_seq = 0;
};

class ThreadsComm : public fsdprt_comm {
public:
  ThreadsComm(ThreadsWorld *world, int64_t rank);

  Status start(const Desc &desc, const void *send, void *recv,
               fsdprt_request **request) override;
  Status wait(fsdprt_request *request) override;
  Status test(fsdprt_request *request, bool *done) override;
  void abort(const Status &cause) override;
  Status async_error() const override;
  bool native_member_layout() const override { return true; }

  // For timeout messages: what this rank is blocked on, if anything.
  std::string activity();

private:
  friend class ThreadsWorld;
  GroupRef &group_ref(int64_t mask);
  void progress();
  void help(ThreadsRequest *r);
  bool verify(ThreadsRequest *r);
  Status failure(const ThreadsRequest *r);
  // Waits until pred() holds, helping outstanding ops meanwhile. On timeout
  // calls on_timeout() for the error, which also aborts the world. what()
  // describes the wait for other ranks' timeout messages.
  template <typename Pred, typename What, typename OnTimeout>
  Status wait_until(Pred pred, const ThreadsRequest *r, What what,
                    OnTimeout on_timeout);
  std::string missing_message(const Group &g, uint64_t seq, double waited,
                              const std::string &what);
  void forget(ThreadsRequest *r);

  ThreadsWorld *world_;
  std::vector<GroupRef> groups_;
  std::vector<ThreadsRequest *> outstanding_;

  std::mutex activity_mu_;
  std::string activity_; // empty when not blocked
};

} // namespace
} // namespace fsdprt

namespace fsdprt {
namespace {

class ThreadsWorld : public fsdprt_world {
public:
  Mesh mesh;
  Options options;
  std::vector<std::unique_ptr<ThreadsComm>> comms;
  EventCount events;
  int spin_iters = 2000;
  int yield_iters = 4;

  std::atomic<bool> aborted{false};
  std::atomic<int64_t> active_tasks{0};

  // With more ranks than cores, at most max_workers threads run tasks at a
  // time; the others sleep instead of preempting a thread that holds a task.
  int max_workers = 1 << 30;
  std::atomic<int> workers{0};
  std::atomic<bool> worker_denied{false};

  bool acquire_worker() {
    for (;;) {
      int v = workers.load(std::memory_order_seq_cst);
      if (v < max_workers) {
        if (workers.compare_exchange_weak(v, v + 1, std::memory_order_seq_cst))
          return true;
        continue;
      }
      // Publish the denial, then look again: either we see the release or
      // the releasing thread sees the flag and wakes the sleepers.
      worker_denied.store(true, std::memory_order_seq_cst);
      if (workers.load(std::memory_order_seq_cst) < max_workers)
        continue;
      return false;
    }
  }
  void release_worker() {
    workers.fetch_sub(1, std::memory_order_seq_cst);
    if (worker_denied.exchange(false, std::memory_order_seq_cst))
      events.notify();
  }

  Group *group(int64_t rank, int64_t mask, int *member) {
    std::vector<int64_t> ranks;
    int64_t gr = 0, gid = 0;
    mesh.group(rank, mask, &ranks, &gr, &gid);
    *member = int(gr);
    std::lock_guard<std::mutex> lock(groups_mu_);
    auto &slot = groups_[{mask, gid}];
    if (!slot) {
      auto g = std::make_unique<Group>();
      g->mask = mask;
      g->k = int(ranks.size());
      g->name = mesh.group_axes(mask);
      g->members = "group ranks " + join_ranks(ranks);
      g->ranks = std::move(ranks);
      for (auto &s : g->slots)
        s.posts.reset(new Post[size_t(g->k)]);
      slot = std::move(g);
    }
    return slot.get();
  }

  // Records the first error of the world and wakes every waiter. group/seq
  // identify the collective the error belongs to (nullptr: none).
  void abort(fsdprt_status_t code, const std::string &message,
             const Group *group, uint64_t seq) {
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      if (aborted.load())
        return;
      abort_code_ = code;
      abort_msg_ = message;
      abort_group_ = group;
      abort_seq_ = seq;
      aborted.store(true, std::memory_order_seq_cst);
    }
    events.notify();
  }

  Status abort_status(int64_t rank, const Group *group, uint64_t seq) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (group && group == abort_group_ && seq == abort_seq_)
      return Status(abort_code_, abort_msg_);
    return Status(
        FSDPRT_ERR_ABORTED,
        format("rank %lld: aborted: %s", (long long)rank, abort_msg_.c_str()));
  }

  // After an abort no task starts; wait for running ones so that no peer
  // touches a failing rank's buffers after its call returned.
  void drain() {
    while (active_tasks.load(std::memory_order_seq_cst) != 0)
      sched_yield();
  }

private:
  std::mutex groups_mu_;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Group>> groups_;
  std::mutex abort_mu_;
  fsdprt_status_t abort_code_ = FSDPRT_OK;
  std::string abort_msg_;
  const Group *abort_group_ = nullptr;
  uint64_t abort_seq_ = 0;
};

// The world's abort, whoever caused it.
Status ThreadsComm::async_error() const {
  if (!world_->aborted.load(std::memory_order_acquire))
    return Status::Ok();
  return world_->abort_status(rank, nullptr, 0);
}

ThreadsComm::ThreadsComm(ThreadsWorld *world, int64_t r) : world_(world) {
  backend = FSDPRT_BACKEND_THREADS;
  mesh = world->mesh;
  options = world->options;
  rank = r;
  groups_.resize(size_t(mesh.num_masks()));
}

GroupRef &ThreadsComm::group_ref(int64_t mask) {
  GroupRef &ref = groups_[size_t(mask)];
  if (!ref.group)
    ref.group = world_->group(rank, mask, &ref.member);
  return ref;
}

std::string ThreadsComm::activity() {
  std::lock_guard<std::mutex> lock(activity_mu_);
  return activity_;
}

Status ThreadsComm::failure(const ThreadsRequest *r) {
  world_->drain();
  return world_->abort_status(rank, r ? r->group : nullptr, r ? r->seq : 0);
}

std::string ThreadsComm::missing_message(const Group &g, uint64_t seq,
                                         double waited,
                                         const std::string &what) {
  const Slot &s = g.slots[seq % kSlots];
  std::vector<int64_t> missing;
  std::string details;
  for (int j = 0; j < g.k; ++j) {
    if (s.posts[size_t(j)].posted.load(std::memory_order_acquire) >= seq + 1)
      continue;
    int64_t r = g.ranks[size_t(j)];
    missing.push_back(r);
    std::string act = world_->comms[size_t(r)]->activity();
    details +=
        format("; rank %lld is %s", (long long)r,
               act.empty() ? "not inside a collective call" : act.c_str());
  }
  std::string msg = format(
      "timeout after %.3g s in collective #%llu %s on group %s: ", waited,
      (unsigned long long)(seq + 1), what.c_str(), g.name.c_str());
  if (missing.empty())
    msg += "all ranks arrived but the collective did not complete (" +
           g.members + ")";
  else
    msg += format("rank(s) %s did not call it (%s)",
                  join_ranks(missing).c_str(), g.members.c_str()) +
           details;
  return msg;
}

template <typename Pred, typename What, typename OnTimeout>
Status ThreadsComm::wait_until(Pred pred, const ThreadsRequest *r, What what,
                               OnTimeout on_timeout) {
  ThreadsWorld &w = *world_;
  for (int i = 0; i < w.spin_iters; ++i) {
    progress();
    if (pred())
      return Status::Ok();
    if (w.aborted.load(std::memory_order_relaxed))
      return failure(r);
    cpu_relax();
  }
  for (int i = 0; i < w.yield_iters; ++i) {
    progress();
    if (pred())
      return Status::Ok();
    if (w.aborted.load(std::memory_order_relaxed))
      return failure(r);
    sched_yield();
  }
  {
    std::lock_guard<std::mutex> lock(activity_mu_);
    activity_ = "waiting in " + what();
  }
  const double t0 = now_s();
  const double timeout = options.timeout_s;
  Status st;
  for (;;) {
    uint32_t key = w.events.prepare_wait();
    progress();
    if (pred()) {
      w.events.cancel_wait();
      break;
    }
    if (w.aborted.load(std::memory_order_seq_cst)) {
      w.events.cancel_wait();
      st = failure(r);
      break;
    }
    double waited = now_s() - t0;
    if (timeout > 0 && waited >= timeout) {
      w.events.cancel_wait();
      on_timeout(waited);
      st = failure(r);
      break;
    }
    w.events.wait(key, timeout > 0 ? timeout - waited : -1.0);
  }
  std::lock_guard<std::mutex> lock(activity_mu_);
  activity_.clear();
  return st;
}

bool ThreadsComm::verify(ThreadsRequest *r) {
  Group &g = *r->group;
  Slot &s = g.slots[r->seq % kSlots];
  const uint32_t tag = tag_of(r->seq);
  uint64_t v = s.verify.load(std::memory_order_acquire);
  for (;;) {
    int32_t d = tag_diff(v, tag);
    if (d > 0)
      return true; // the slot moved on: the op completed long ago
    if (d == 0) {
      uint32_t state = uint32_t(v);
      if (state == kVerified)
        return true;
      return false; // being verified by another member, or desync
    }
    if (s.verify.compare_exchange_weak(v, make_word(tag, kVerifying),
                                       std::memory_order_acq_rel))
      break;
  }
  const Post *posts = s.posts.get();
  // Always checked here: it costs k comparisons and guards the copies.
  int bad = -1;
  for (int j = 1; j < g.k && bad < 0; ++j)
    if (posts[j].desc != posts[0].desc)
      bad = j;
  if (bad < 0) {
    s.verify.store(make_word(tag, kVerified), std::memory_order_release);
    if (r->ntasks > 1)
      world_->events.notify(); // let blocked members help with the tasks
    return true;
  }
  std::string msg = format(
      "desync in collective #%llu on group %s: rank %lld called %s but rank "
      "%lld called %s (%s)",
      (unsigned long long)(r->seq + 1), g.name.c_str(), (long long)g.ranks[0],
      describe(posts[0].desc).c_str(), (long long)g.ranks[size_t(bad)],
      describe(posts[bad].desc).c_str(), g.members.c_str());
  world_->abort(FSDPRT_ERR_DESYNC, msg, &g, r->seq);
  s.verify.store(make_word(tag, kDesync), std::memory_order_release);
  return false;
}

void ThreadsComm::help(ThreadsRequest *r) {
  ThreadsWorld &w = *world_;
  Group &g = *r->group;
  Slot &s = g.slots[r->seq % kSlots];
  const uint32_t tag = tag_of(r->seq);
  if (op_complete(s, tag, r->ntasks)) {
    r->done = true;
    return;
  }
  if (!r->all_posted) {
    for (int j = 0; j < g.k; ++j)
      if (s.posts[size_t(j)].posted.load(std::memory_order_acquire) <
          r->seq + 1)
        return;
    r->all_posted = true;
  }
  if (!verify(r))
    return;
  if (!w.acquire_worker())
    return; // woken when a worker leaves or the op completes
  for (;;) {
    w.active_tasks.fetch_add(1, std::memory_order_seq_cst);
    if (w.aborted.load(std::memory_order_seq_cst)) {
      w.active_tasks.fetch_sub(1, std::memory_order_seq_cst);
      w.release_worker();
      return;
    }
    int64_t task = claim_task(s, tag, r->ntasks);
    if (task < 0) {
      w.active_tasks.fetch_sub(1, std::memory_order_seq_cst);
      break;
    }
    run_task(g, s, r->desc,
             r->member_offsets.empty() ? nullptr : r->member_offsets.data(),
             task, r->ntasks);
    bool last = finish_task(s, tag, r->ntasks);
    w.active_tasks.fetch_sub(1, std::memory_order_seq_cst);
    if (last)
      w.events.notify();
  }
  w.release_worker();
  if (op_complete(s, tag, r->ntasks))
    r->done = true;
}

void ThreadsComm::progress() {
  bool any_done = false;
  for (ThreadsRequest *r : outstanding_) {
    if (!r->done)
      help(r);
    any_done |= r->done;
  }
  if (any_done)
    outstanding_.erase(
        std::remove_if(outstanding_.begin(), outstanding_.end(),
                       [](ThreadsRequest *r) { return r->done; }),
        outstanding_.end());
}

void ThreadsComm::forget(ThreadsRequest *r) {
  auto it = std::find(outstanding_.begin(), outstanding_.end(), r);
  if (it != outstanding_.end())
    outstanding_.erase(it);
}

Status ThreadsComm::start(const Desc &desc, const void *send, void *recv,
                          fsdprt_request **request) {
  ThreadsWorld &w = *world_;
  if (w.aborted.load(std::memory_order_acquire))
    return failure(nullptr);
  GroupRef &ref = group_ref(desc.mask);
  Group &g = *ref.group;
  auto req = std::make_unique<ThreadsRequest>();
  req->comm = this;
  req->group = &g;
  req->member = ref.member;
  req->desc = desc;

  if (g.k == 1) { // a group of one: the collective is a copy (a member
                  // layout of one slot is the rank-major one)
    size_t bytes = size_t(desc.count) * fsdprt_dtype_size(desc.dtype);
    copy_bytes(recv, send, bytes);
    req->done = true;
    *request = req.release();
    return Status::Ok();
  }

  const uint64_t seq = ref.next_seq++;
  req->seq = seq;
  req->ntasks = task_count(desc, g.k);
  if (desc.n_members > 1)
    member_offsets(desc, &req->member_offsets);
  Slot &s = g.slots[seq % kSlots];
  Post &mine = s.posts[size_t(ref.member)];

  if (seq >= uint64_t(kSlots)) {
    // The slot still belongs to op seq - kSlots until that op completes.
    const uint64_t prev = seq - kSlots;
    const int64_t prev_tasks = mine.ntasks;
    auto what = [&] {
      return format("collective #%llu on group %s (to reuse its slot)",
                    (unsigned long long)(prev + 1), g.name.c_str());
    };
    Status st = wait_until(
        [&] { return op_complete(s, tag_of(prev), prev_tasks); }, nullptr, what,
        [&](double waited) {
          w.abort(FSDPRT_ERR_TIMEOUT,
                  missing_message(g, prev, waited,
                                  describe(s.posts[size_t(ref.member)].desc)),
                  &g, seq);
        });
    if (!st.ok()) {
      // Fail this op with the same message when it was our timeout.
      return world_->abort_status(rank, &g, seq);
    }
  }

  mine.desc = desc;
  mine.send = send;
  mine.recv = recv;
  mine.ntasks = req->ntasks;
  mine.posted.store(seq + 1, std::memory_order_release);
  w.events.notify();

  outstanding_.push_back(req.get());
  *request = req.release();
  return Status::Ok();
}

Status ThreadsComm::wait(fsdprt_request *request) {
  auto *r = static_cast<ThreadsRequest *>(request);
  if (r->done) {
    forget(r);
    return r->result;
  }
  ThreadsWorld &w = *world_;
  auto what = [&] {
    return format("collective #%llu %s on group %s",
                  (unsigned long long)(r->seq + 1), describe(r->desc).c_str(),
                  r->group->name.c_str());
  };
  Status st = wait_until(
      [&] { return r->done; }, r, what,
      [&](double waited) {
        w.abort(FSDPRT_ERR_TIMEOUT,
                missing_message(*r->group, r->seq, waited, describe(r->desc)),
                r->group, r->seq);
      });
  forget(r);
  r->done = true;
  r->result = st;
  return st;
}

Status ThreadsComm::test(fsdprt_request *request, bool *done) {
  auto *r = static_cast<ThreadsRequest *>(request);
  if (!r->done) {
    progress();
    if (!r->done && world_->aborted.load(std::memory_order_acquire)) {
      forget(r);
      r->done = true;
      r->result = failure(r);
    }
  }
  *done = r->done;
  if (r->done)
    forget(r);
  return r->result;
}

void ThreadsComm::abort(const Status &cause) {
  world_->abort(cause.code, cause.message, nullptr, 0);
}

} // namespace
} // namespace fsdprt

using namespace fsdprt;

extern "C" {

fsdprt_status_t fsdprt_threads_world_create(int32_t ndims, const int64_t *shape,
                                            const fsdprt_options_t *options,
                                            fsdprt_world_t **world) {
  if (!world)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *world = nullptr;
  Mesh mesh;
  Status st = Mesh::create(ndims, shape,
                           options ? options->axis_names : nullptr, &mesh);
  if (!st.ok())
    return st.code;
  try {
    auto w = std::make_unique<ThreadsWorld>();
    w->mesh = mesh;
    w->options = resolve_options(options);
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    if (mesh.size > int64_t(cores)) {
      // More ranks than cores: spinning only delays the ranks we wait for.
      w->spin_iters = 50;
      w->yield_iters = 2;
      w->max_workers = int(cores);
    }
    for (int64_t r = 0; r < mesh.size; ++r)
      w->comms.push_back(std::make_unique<ThreadsComm>(w.get(), r));
    *world = w.release();
  } catch (const std::bad_alloc &) {
    return fsdprt::fail_call(FSDPRT_ERR_OUT_OF_MEMORY, __func__);
  }
  return FSDPRT_OK;
}

fsdprt_status_t fsdprt_threads_comm(fsdprt_world_t *world, int64_t rank,
                                    fsdprt_comm_t **comm) {
  auto *w = dynamic_cast<ThreadsWorld *>(world);
  if (!w || !comm || rank < 0 || rank >= w->mesh.size)
    return fsdprt::fail_call(FSDPRT_ERR_INVALID_ARGUMENT, __func__);
  *comm = w->comms[size_t(rank)].get();
  return FSDPRT_OK;
}

void fsdprt_world_abort(fsdprt_world_t *world, const char *reason) {
  auto *w = dynamic_cast<ThreadsWorld *>(world);
  if (!w)
    return;
  w->abort(FSDPRT_ERR_ABORTED,
           std::string("fsdprt_world_abort: ") + (reason ? reason : ""),
           nullptr, 0);
}

void fsdprt_world_destroy(fsdprt_world_t *world) { delete world; }

} // extern "C"
