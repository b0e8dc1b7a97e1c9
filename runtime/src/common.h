// Internal definitions shared by the runtime's front end and backends.
#ifndef FSDPRT_SRC_COMMON_H
#define FSDPRT_SRC_COMMON_H

#include "fsdprt.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

struct fsdprt_quant_layout;

namespace fsdprt {

struct Status {
  fsdprt_status_t code = FSDPRT_OK;
  std::string message;

  Status() = default;
  Status(fsdprt_status_t c, std::string m) : code(c), message(std::move(m)) {}
  bool ok() const { return code == FSDPRT_OK; }
  static Status Ok() { return Status(); }
};

// printf-style formatting into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The thread's last error (fsdprt_get_last_error): set by every error
// recorded on a comm, a GPU context or the process, and by fail_call.
void set_last_error(fsdprt_status_t code, const std::string &message);
// A C API call `fn` fails with `code` before reaching a comm: records
// "fn: <status>" as the thread's last error and returns code.
fsdprt_status_t fail_call(fsdprt_status_t code, const char *fn);
fsdprt_status_t last_error();
const std::string &last_error_message();
void clear_last_error();

// What a rank asked for in one collective; compared across a group to
// detect desynchronized programs.
struct Desc {
  int32_t kind = 0;  // fsdprt_collective_kind_t
  int32_t dtype = 0; // fsdprt_dtype_t
  int32_t op = -1;   // fsdprt_reduce_op_t, -1 for all_gather
  int32_t pad = 0;
  int64_t count = 0; // the count argument as passed
  int64_t mask = 0;
  // Member layout (fsdprt_all_gather_members, ...): n_members > 1 members
  // of members[i] elements per rank; 0 for the plain collective (one
  // member is the plain collective too and is stored as 0). members points
  // to the caller's counts, valid until the collective completes on this
  // rank: it is never compared and never read on another rank (the mpi and
  // nccl backends send descriptors as raw bytes). members_hash
  // (hash_members) is what ranks compare.
  int64_t n_members = 0;
  uint64_t members_hash = 0;
  const int64_t *members = nullptr;

  bool operator==(const Desc &o) const {
    return kind == o.kind && dtype == o.dtype && op == o.op &&
           count == o.count && mask == o.mask && n_members == o.n_members &&
           members_hash == o.members_hash;
  }
  bool operator!=(const Desc &o) const { return !(*this == o); }
};

const char *kind_name(int32_t kind);
// "all_gather(f32, count=48)" or "reduce_scatter(bf16, count=64, op=sum)";
// a member layout adds its number of members and a digest of its counts:
// "all_gather(f32, count=48, members=12, layout=5c0f81e2)".
std::string describe(const Desc &d);

// A 64-bit digest (FNV-1a) of a member layout's counts.
uint64_t hash_members(int64_t n_members, const int64_t *counts);
// Offsets of the members within one rank's elements: off[i] = c_0 + ... +
// c_{i-1} for i = 0..n (n + 1 entries, off[n] = d.count).
void member_offsets(const Desc &d, std::vector<int64_t> *off);
// The member-major buffer of k slots (member i's block at k * off_i, slot j
// of it at k * off_i + j * c_i) from the rank-major one (slot j at j *
// count, member i at j * count + off_i), and back. Bytes of es-byte
// elements; src and dst do not overlap.
void rank_major_to_members(const Desc &d, int64_t k, size_t es, const void *src,
                           void *dst);
void members_to_rank_major(const Desc &d, int64_t k, size_t es, const void *src,
                           void *dst);

// Elements of the send and receive buffers of one rank for group size k.
int64_t send_elems(const Desc &d, int64_t k);
int64_t recv_elems(const Desc &d, int64_t k);

// A device mesh: static axis sizes and names, row-major rank numbering.
struct Mesh {
  int32_t ndims = 0;
  int64_t shape[FSDPRT_MAX_MESH_DIMS] = {};
  int64_t stride[FSDPRT_MAX_MESH_DIMS] = {};
  int64_t size = 1;
  std::vector<std::string> names;

  static Status create(int32_t ndims, const int64_t *shape,
                       const char *const *names, Mesh *out);
  int64_t num_masks() const { return int64_t(1) << ndims; }
  void coords(int64_t rank, int64_t *out) const;
  // Group selected by `mask` for `rank`: member ranks in group order, this
  // rank's index among them, and an id that numbers the groups of the mask.
  void group(int64_t rank, int64_t mask, std::vector<int64_t> *members,
             int64_t *group_rank, int64_t *group_id) const;
  int64_t group_size(int64_t mask) const;
  // "{axes: replicate,shard}".
  std::string group_axes(int64_t mask) const;
};

std::string join_ranks(const std::vector<int64_t> &ranks);

// Options after defaults and environment were applied.
struct Options {
  double timeout_s = 60.0;
  bool check_desync = true;
};
Options resolve_options(const fsdprt_options_t *options);

// The checks and wire layout of a rank's local quantization steps, shared
// by the host path (jit_quant.cpp) and the device path (cuda/gpu_quant.cpp):
// "" or why they cannot run.
std::string quant_local_layout(int32_t dtype, int32_t fmt, int64_t rows,
                               int64_t cols, fsdprt_quant_layout *layout);

// Monotonic seconds.
inline double now_s() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace fsdprt

// A request returned by the *_async functions. Backends derive from it.
struct fsdprt_request {
  fsdprt_comm *comm = nullptr;
  virtual ~fsdprt_request() = default;
};

// Communicator of one rank. Backends derive from it; the front end
// (api.cpp) validates arguments, counts statistics and records errors.
namespace fsdprt {
// The planned buffers of the compiled step on one rank (arena.cpp): one
// mapping, reserved on the rank's thread, released with the comm.
struct Arena {
  void *base = nullptr;
  int64_t bytes = 0; // the largest reservation asked for
  size_t mapped = 0; // bytes mapped (whole pages)
  Arena() = default;
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  ~Arena();
};
} // namespace fsdprt

struct fsdprt_comm {
  fsdprt_backend_t backend = FSDPRT_BACKEND_THREADS;
  fsdprt::Mesh mesh;
  fsdprt::Options options;
  int64_t rank = 0;

  virtual ~fsdprt_comm() = default;

  // Starts a validated collective. On success *request is owned by the
  // caller and must be completed with wait() (or test() until done) and
  // then deleted.
  virtual fsdprt::Status start(const fsdprt::Desc &desc, const void *send,
                               void *recv, fsdprt_request **request) = 0;
  virtual fsdprt::Status wait(fsdprt_request *request) = 0;
  virtual fsdprt::Status test(fsdprt_request *request, bool *done) = 0;
  // Synchronous collective; backends may avoid the heap request.
  virtual fsdprt::Status run(const fsdprt::Desc &desc, const void *send,
                             void *recv);
  // Whether start() and run() take descriptors with a member layout
  // (Desc::n_members > 1). Otherwise the front end runs the plain
  // collective on a rank-major scratch buffer and permutes it, which needs
  // host buffers.
  virtual bool native_member_layout() const { return false; }
  // Whether the collectives' buffers are host memory (not nccl's).
  virtual bool host_buffers() const { return true; }
  // The front end's rank-major scratch buffers of member layouts, kept for
  // the next collective: a step's buckets come back every step, and a fresh
  // allocation of a large bucket would fault in its pages every time.
  // Used by the thread the comm is set on.
  std::vector<std::pair<size_t, std::unique_ptr<char[]>>> scratch_free;
  // Fails every rank of the world fast after a local error.
  virtual void abort(const fsdprt::Status &cause) = 0;
  // Called after a jit entry point (which cannot return an error to the
  // compiled code) recorded an error on this comm. The mpi backend ends
  // the job there; the others let the program run on (later collectives
  // return at once) so that the caller reads the error.
  virtual void jit_failed() {}
  // Called by fsdprt_set_thread_comm on the thread that will use the comm
  // (the nccl backend makes its GPU context current there).
  virtual void attach_thread() {}

  // Errors (thread safe). record_error also sets the calling thread's last
  // error.
  void record_error(const fsdprt::Status &st);
  // An error that reached this comm outside the caller's calls (another
  // rank's abort, the nccl watchdog): fsdprt_comm_get_async_error. Read
  // from any thread.
  virtual fsdprt::Status async_error() const { return fsdprt::Status::Ok(); }
  fsdprt_status_t first_error() const;
  std::string first_error_message() const;
  std::string last_error_message() const;

  // Statistics (updated by the owning thread, read from any thread).
  std::atomic<uint64_t> stat_calls[FSDPRT_NUM_KINDS] = {};
  std::atomic<uint64_t> stat_sent[FSDPRT_NUM_KINDS] = {};
  std::atomic<uint64_t> stat_received[FSDPRT_NUM_KINDS] = {};
  // Exposed communication (fsdprt_stats_t::exposed_ns).
  mutable std::atomic<uint64_t> stat_exposed_ns{0};
  // Whether collective calls block the thread until the data is there (the
  // CPU backends: their time in the calls is the exposed communication).
  // nccl only enqueues and measures on the device instead.
  virtual bool host_blocks() const { return true; }
  // Adds the device-side waits that have finished to stat_exposed_ns.
  virtual void collect_exposed() const {}

  // Outstanding jit handles (used by the thread the comm is set on).
  std::unordered_map<int64_t, fsdprt_request *> jit_requests;
  int64_t jit_next_handle = 1;

  // The step's arena (used by the thread the comm is set on).
  fsdprt::Arena arena;

private:
  mutable std::mutex error_mu_;
  fsdprt_status_t first_code_ = FSDPRT_OK;
  std::string first_msg_;
  std::string last_msg_;
};

struct fsdprt_world {
  virtual ~fsdprt_world() = default;
};

#endif // FSDPRT_SRC_COMMON_H
