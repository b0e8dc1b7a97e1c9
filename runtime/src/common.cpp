#include "common.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace fsdprt {

std::string format(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n < 0)
    return std::string();
  if (size_t(n) < sizeof(buf))
    return std::string(buf, size_t(n));
  std::string out(size_t(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(&out[0], out.size(), fmt, ap);
  va_end(ap);
  out.resize(size_t(n));
  return out;
}

const char *kind_name(int32_t kind) {
  switch (kind) {
  case FSDPRT_KIND_ALL_GATHER:
    return "all_gather";
  case FSDPRT_KIND_REDUCE_SCATTER:
    return "reduce_scatter";
  case FSDPRT_KIND_ALL_REDUCE:
    return "all_reduce";
  }
  return "?";
}

std::string describe(const Desc &d) {
  std::string s = format("%s(%s, count=%lld", kind_name(d.kind),
                         fsdprt_dtype_name(d.dtype), (long long)d.count);
  if (d.kind != FSDPRT_KIND_ALL_GATHER)
    s += format(", op=%s", fsdprt_reduce_op_name(d.op));
  if (d.n_members > 0)
    s += format(", members=%lld, layout=%08x", (long long)d.n_members,
                unsigned(uint32_t(d.members_hash ^ (d.members_hash >> 32))));
  return s + ")";
}

uint64_t hash_members(int64_t n_members, const int64_t *counts) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](int64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (uint64_t(v) >> (8 * b)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  add(n_members);
  for (int64_t i = 0; i < n_members; ++i)
    add(counts[i]);
  return h;
}

void member_offsets(const Desc &d, std::vector<int64_t> *off) {
  off->resize(size_t(d.n_members) + 1);
  int64_t sum = 0;
  for (int64_t i = 0; i < d.n_members; ++i) {
    (*off)[size_t(i)] = sum;
    sum += d.members[i];
  }
  (*off)[size_t(d.n_members)] = sum;
}

// Calls fn(member-major byte offset, rank-major byte offset, bytes) for
// every (member, slot) piece.
template <typename Fn>
static void for_each_member_piece(const Desc &d, int64_t k, size_t es, Fn fn) {
  int64_t off = 0;
  for (int64_t i = 0; i < d.n_members; ++i) {
    const int64_t c = d.members[i];
    for (int64_t j = 0; j < k && c > 0; ++j)
      fn(size_t(k * off + j * c) * es, size_t(j * d.count + off) * es,
         size_t(c) * es);
    off += c;
  }
}

void rank_major_to_members(const Desc &d, int64_t k, size_t es, const void *src,
                           void *dst) {
  for_each_member_piece(d, k, es, [&](size_t mm, size_t rm, size_t bytes) {
    std::memcpy(static_cast<char *>(dst) + mm,
                static_cast<const char *>(src) + rm, bytes);
  });
}

void members_to_rank_major(const Desc &d, int64_t k, size_t es, const void *src,
                           void *dst) {
  for_each_member_piece(d, k, es, [&](size_t mm, size_t rm, size_t bytes) {
    std::memcpy(static_cast<char *>(dst) + rm,
                static_cast<const char *>(src) + mm, bytes);
  });
}

int64_t send_elems(const Desc &d, int64_t k) {
  return d.kind == FSDPRT_KIND_REDUCE_SCATTER ? d.count * k : d.count;
}

int64_t recv_elems(const Desc &d, int64_t k) {
  return d.kind == FSDPRT_KIND_ALL_GATHER ? d.count * k : d.count;
}

Status Mesh::create(int32_t ndims, const int64_t *shape,
                    const char *const *names, Mesh *out) {
  if (ndims < 0 || ndims > FSDPRT_MAX_MESH_DIMS)
    return Status(FSDPRT_ERR_INVALID_ARGUMENT,
                  format("mesh must have 0..%d axes, got %d",
                         FSDPRT_MAX_MESH_DIMS, (int)ndims));
  if (ndims > 0 && !shape)
    return Status(FSDPRT_ERR_INVALID_ARGUMENT, "mesh shape is NULL");
  Mesh m;
  m.ndims = ndims;
  m.size = 1;
  for (int i = 0; i < ndims; ++i) {
    if (shape[i] <= 0 || shape[i] > (int64_t(1) << 20))
      return Status(
          FSDPRT_ERR_INVALID_ARGUMENT,
          format("mesh axis %d has invalid size %lld", i, (long long)shape[i]));
    m.shape[i] = shape[i];
    m.size *= shape[i];
    if (m.size > (int64_t(1) << 20))
      return Status(FSDPRT_ERR_INVALID_ARGUMENT, "mesh has too many ranks");
  }
  int64_t s = 1;
  for (int i = ndims - 1; i >= 0; --i) {
    m.stride[i] = s;
    s *= m.shape[i];
  }
  for (int i = 0; i < ndims; ++i) {
    if (names && names[i] && names[i][0])
      m.names.emplace_back(names[i]);
    else
      m.names.push_back(format("axis%d", i));
  }
  *out = std::move(m);
  return Status::Ok();
}

void Mesh::coords(int64_t rank, int64_t *out) const {
  for (int i = 0; i < ndims; ++i)
    out[i] = (rank / stride[i]) % shape[i];
}

void Mesh::group(int64_t rank, int64_t mask, std::vector<int64_t> *members,
                 int64_t *group_rank, int64_t *group_id) const {
  int64_t c[FSDPRT_MAX_MESH_DIMS];
  coords(rank, c);
  int64_t base = 0, gr = 0, gid = 0;
  for (int i = 0; i < ndims; ++i) {
    if (mask & (int64_t(1) << i)) {
      gr = gr * shape[i] + c[i];
    } else {
      base += c[i] * stride[i];
      gid = gid * shape[i] + c[i];
    }
  }
  if (group_rank)
    *group_rank = gr;
  if (group_id)
    *group_id = gid;
  if (!members)
    return;
  // Enumerate the masked axes' coordinates row-major (last masked axis
  // fastest), the other coordinates fixed to this rank's.
  members->clear();
  int64_t k = group_size(mask);
  members->reserve(size_t(k));
  for (int64_t idx = 0; idx < k; ++idx) {
    int64_t rem = idx, r = base;
    for (int i = ndims - 1; i >= 0; --i) {
      if (!(mask & (int64_t(1) << i)))
        continue;
      r += (rem % shape[i]) * stride[i];
      rem /= shape[i];
    }
    members->push_back(r);
  }
}

int64_t Mesh::group_size(int64_t mask) const {
  int64_t k = 1;
  for (int i = 0; i < ndims; ++i)
    if (mask & (int64_t(1) << i))
      k *= shape[i];
  return k;
}

std::string Mesh::group_axes(int64_t mask) const {
  std::string s = "{axes: ";
  bool first = true;
  for (int i = 0; i < ndims; ++i) {
    if (!(mask & (int64_t(1) << i)))
      continue;
    if (!first)
      s += ",";
    s += names[size_t(i)];
    first = false;
  }
  if (first)
    s += "none";
  s += "}";
  return s;
}

std::string join_ranks(const std::vector<int64_t> &ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(ranks[i]);
  }
  return s;
}

static bool env_double(const char *name, double *out) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return false;
  char *end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v)
    return false;
  *out = d;
  return true;
}

Options resolve_options(const fsdprt_options_t *options) {
  fsdprt_options_t defaults;
  if (!options) {
    fsdprt_options_init(&defaults);
    options = &defaults;
  }
  Options o;
  o.timeout_s = options->timeout_s;
  o.check_desync = options->check_desync != 0;
  return o;
}

namespace {
thread_local fsdprt_status_t tls_last_code = FSDPRT_OK;
thread_local std::string tls_last_message;
} // namespace

void set_last_error(fsdprt_status_t code, const std::string &message) {
  if (code == FSDPRT_OK)
    return;
  tls_last_code = code;
  tls_last_message = message;
}

fsdprt_status_t fail_call(fsdprt_status_t code, const char *fn) {
  set_last_error(code, format("%s: %s", fn, fsdprt_status_string(code)));
  return code;
}

fsdprt_status_t last_error() { return tls_last_code; }
const std::string &last_error_message() { return tls_last_message; }
void clear_last_error() {
  tls_last_code = FSDPRT_OK;
  tls_last_message.clear();
}

} // namespace fsdprt

using namespace fsdprt;

extern "C" void fsdprt_options_init(fsdprt_options_t *options) {
  if (!options)
    return;
  std::memset(options, 0, sizeof(*options));
  double t = 60.0;
  env_double("FSDPRT_TIMEOUT_S", &t);
  options->timeout_s = t;
  double check = 1.0;
  env_double("FSDPRT_CHECK_DESYNC", &check);
  options->check_desync = check != 0.0;
  options->axis_names = nullptr;
}

Status fsdprt_comm::run(const Desc &desc, const void *send, void *recv) {
  fsdprt_request *req = nullptr;
  Status st = start(desc, send, recv, &req);
  if (!st.ok())
    return st;
  st = wait(req);
  delete req;
  return st;
}

void fsdprt_comm::record_error(const Status &st) {
  if (st.ok())
    return;
  fsdprt::set_last_error(st.code, st.message);
  std::lock_guard<std::mutex> lock(error_mu_);
  if (first_code_ == FSDPRT_OK) {
    first_code_ = st.code;
    first_msg_ = st.message;
  }
  last_msg_ = st.message;
}

fsdprt_status_t fsdprt_comm::first_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return first_code_;
}

std::string fsdprt_comm::first_error_message() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return first_msg_;
}

std::string fsdprt_comm::last_error_message() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return last_msg_;
}
