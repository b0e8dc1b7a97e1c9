//===- CAPI.cpp - fsdprun.h over the runner library -----------------------===//

#include "Npy.h"
#include "fsdp/Runner/Runner.h"
#include "fsdprun.h"

#include <iterator>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>

using namespace ::fsdp::run;

struct fsdprun_program {
  std::unique_ptr<Session> session;
  std::vector<PortInfo> inputs, outputs;
  std::optional<RunResult> last;
  std::string json;
  std::mutex mutex; // serializes the calls on this program
};

namespace {

thread_local std::string lastError;

/// The live programs: a handle not in here is refused.
std::mutex registryMutex;
std::set<fsdprun_program *> &registry() {
  static std::set<fsdprun_program *> live;
  return live;
}

fsdprun_status_t failWith(fsdprun_status_t status, const std::string &msg) {
  lastError = msg;
  return status;
}

fsdprun_status_t ok() { return FSDPRUN_OK; }

/// The message of `e`, and whether it says the resource is busy.
std::string consume(Error e, bool &busy) {
  busy = e.code() == std::errc::device_or_resource_busy;
  return toString(std::move(e));
}

/// The program behind a handle, locked; or a status.
struct Locked {
  fsdprun_program *p = nullptr;
  std::unique_lock<std::mutex> lock;
};

fsdprun_status_t lockProgram(fsdprun_program_t *handle, Locked &out) {
  std::lock_guard<std::mutex> guard(registryMutex);
  if (!handle || !registry().count(handle))
    return failWith(FSDPRUN_ERR_INVALID_HANDLE,
                    handle ? "not a live fsdprun program (destroyed?)"
                           : "the program handle is null");
  out.p = handle;
  out.lock = std::unique_lock<std::mutex>(handle->mutex);
  return FSDPRUN_OK;
}

/// numpy's name of each fsdprun_dtype_t, in the enum's order.
constexpr const char *kDescrs[] = {"<f4", "<f8", "<u2", "<f2",
                                   "<i4", "<i8", "|u1"};
static_assert(std::size(kDescrs) == FSDPRUN_U8 + 1, "one per fsdprun_dtype_t");

const char *dtypeName(fsdprun_dtype_t t) {
  return t >= 0 && size_t(t) < std::size(kDescrs) ? kDescrs[t] : nullptr;
}

fsdprun_dtype_t dtypeOf(const std::string &descr) {
  for (size_t t = 0; t < std::size(kDescrs); ++t)
    if (descr == kDescrs[t])
      return fsdprun_dtype_t(t);
  return FSDPRUN_U8;
}

/// Locks the program and checks the result pointer, then stores what `get`
/// reads of it there.
template <typename T, typename Get>
fsdprun_status_t query(fsdprun_program_t *handle, T *out, Get get) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(handle, l))
    return s;
  if (!out)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "null result pointer");
  *out = get(*l.p);
  return FSDPRUN_OK;
}

LoadOptions loadOptions(const fsdprun_options_t *o) {
  fsdprun_options_t defaults;
  fsdprun_options_init(&defaults);
  if (!o)
    o = &defaults;
  LoadOptions load;
  load.entry = o->entry ? o->entry : "";
  load.jitCacheDir = o->jit_cache_dir ? o->jit_cache_dir : "";
  load.backend = o->backend == FSDPRUN_MPI ? Backend::Mpi : Backend::Threads;
  load.timeoutSeconds = o->timeout_s;
  load.world = o->world;
  return load;
}

fsdprun_status_t
create(const std::function<Expected<std::unique_ptr<Session>>()> &open,
       const fsdprun_options_t *options, fsdprun_program_t **out) {
  if (!out)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "the result pointer is null");
  *out = nullptr;
  if (options && options->backend != FSDPRUN_THREADS &&
      options->backend != FSDPRUN_MPI)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "unknown backend");
  auto session = open();
  if (!session) {
    bool busy = false;
    std::string msg = consume(session.takeError(), busy);
    return failWith(busy ? FSDPRUN_ERR_BUSY : FSDPRUN_ERR_LOAD, msg);
  }
  auto p = std::make_unique<fsdprun_program>();
  p->session = std::move(*session);
  p->inputs = p->session->inputs();
  p->outputs = p->session->outputs();
  std::lock_guard<std::mutex> guard(registryMutex);
  registry().insert(p.get());
  *out = p.release();
  return ok();
}

const PortInfo *findPort(const std::vector<PortInfo> &ports, const char *name) {
  for (const PortInfo &port : ports)
    if (port.name == name)
      return &port;
  return nullptr;
}

fsdprun_status_t portInfo(fsdprun_program_t *handle, bool inputs, int64_t index,
                          const char **name, fsdprun_dtype_t *dtype,
                          int64_t *rank, const int64_t **shape) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(handle, l))
    return s;
  const std::vector<PortInfo> &ports = inputs ? l.p->inputs : l.p->outputs;
  if (index < 0 || index >= int64_t(ports.size()))
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT,
                    "index " + std::to_string(index) + " is out of range");
  const PortInfo &port = ports[size_t(index)];
  if (name)
    *name = port.name.c_str();
  if (dtype)
    *dtype = dtypeOf(port.dtype);
  if (rank)
    *rank = int64_t(port.globalShape.size());
  if (shape)
    *shape = port.globalShape.data();
  return ok();
}

std::string shapeText(const int64_t *shape, int64_t rank) {
  std::string s = "[";
  for (int64_t d = 0; d < rank; ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

/// The C checks of fsdprun_set_input: the name, dtype, shape and size.
fsdprun_status_t checkInput(const fsdprun_program &p, const char *name,
                            fsdprun_dtype_t dtype, int64_t rank,
                            const int64_t *shape, size_t bytes) {
  const PortInfo *port = findPort(p.inputs, name);
  if (!port)
    return failWith(FSDPRUN_ERR_NOT_FOUND,
                    "the step has no input '" + std::string(name) + "'");
  const char *descr = dtypeName(dtype);
  if (!descr)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "unknown dtype");
  if (port->dtype != descr)
    return failWith(FSDPRUN_ERR_DTYPE, "input '" + port->name + "' is " +
                                           port->dtype + ", not " + descr);
  if (rank < 0 || (rank > 0 && !shape))
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "bad rank or null shape");
  std::vector<int64_t> given(shape, shape + rank);
  // One value per training step along a leading dimension is accepted too.
  bool stacked = rank == int64_t(port->globalShape.size()) + 1 &&
                 std::equal(port->globalShape.begin(), port->globalShape.end(),
                            given.begin() + 1) &&
                 !port->fedBack;
  if (given != port->globalShape && !stacked)
    return failWith(FSDPRUN_ERR_SHAPE,
                    "input '" + port->name + "' has shape " +
                        shapeText(shape, rank) + ", expected " +
                        shapeText(port->globalShape.data(),
                                  int64_t(port->globalShape.size())));
  int64_t elements = 1;
  for (int64_t d : given)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
      return failWith(FSDPRUN_ERR_SHAPE, "bad shape");
  if (uint64_t(elements) * uint64_t(::fsdp::npy::elementSize(descr)) != bytes)
    return failWith(FSDPRUN_ERR_SHAPE, "input '" + port->name +
                                           "': " + std::to_string(bytes) +
                                           " bytes do not hold its shape");
  return ok();
}

RunOptions runOptions(const fsdprun_run_options_t *o) {
  fsdprun_run_options_t defaults;
  fsdprun_run_options_init(&defaults);
  if (!o)
    o = &defaults;
  RunOptions run;
  if (o->input_dir && *o->input_dir)
    run.inputDirs.push_back(o->input_dir);
  for (const char *const *d = o->more_input_dirs; d && *d; ++d)
    if (**d)
      run.inputDirs.push_back(*d);
  run.steps = o->steps;
  run.warmup = o->warmup;
  run.saveDir = o->save_dir ? o->save_dir : "";
  run.saveEvery = o->save_every;
  run.resumeDir = o->resume_dir ? o->resume_dir : "";
  run.cudaGraphs = o->cuda_graphs != 0;
  run.measureResidentSet = true; // fsdprun_report_json has fsdp-run --json's

  return run;
}

/// The last run's output `name`, or a status.
fsdprun_status_t lastOutput(const fsdprun_program &p, const char *name,
                            const HostArray *&out) {
  if (!name)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "the name is null");
  if (!p.last)
    return failWith(FSDPRUN_ERR_ORDER, "no run has completed yet");
  if (!p.last->isReporter)
    return failWith(FSDPRUN_ERR_ORDER, "outputs are on rank 0 only");
  out = p.last->output(name);
  if (!out)
    return failWith(FSDPRUN_ERR_NOT_FOUND,
                    "the step has no output '" + std::string(name) + "'");
  return ok();
}

} // namespace

extern "C" {

void fsdprun_options_init(fsdprun_options_t *o) {
  if (!o)
    return;
  o->entry = nullptr;
  o->jit_cache_dir = nullptr;
  o->backend = FSDPRUN_THREADS;
  o->timeout_s = 60.0;
  o->world = 0;
}

void fsdprun_run_options_init(fsdprun_run_options_t *o) {
  if (!o)
    return;
  o->steps = 1;
  o->warmup = 0;
  o->input_dir = nullptr;
  o->save_dir = nullptr;
  o->save_every = 0;
  o->resume_dir = nullptr;
  o->cuda_graphs = 1;
  o->more_input_dirs = nullptr;
}

const char *fsdprun_last_error(void) { return lastError.c_str(); }

const char *fsdprun_status_string(fsdprun_status_t status) {
  switch (status) {
  case FSDPRUN_OK:
    return "ok";
  case FSDPRUN_ERR_INVALID_ARGUMENT:
    return "invalid argument";
  case FSDPRUN_ERR_INVALID_HANDLE:
    return "invalid program handle";
  case FSDPRUN_ERR_LOAD:
    return "the module cannot be loaded";
  case FSDPRUN_ERR_NOT_FOUND:
    return "no such input or output";
  case FSDPRUN_ERR_SHAPE:
    return "shape mismatch";
  case FSDPRUN_ERR_DTYPE:
    return "dtype mismatch";
  case FSDPRUN_ERR_ORDER:
    return "call out of order";
  case FSDPRUN_ERR_RUN:
    return "the run failed";
  case FSDPRUN_ERR_UNUSABLE:
    return "the program is no longer usable";
  case FSDPRUN_ERR_BUSY:
    return "another MPI program is open in this process";
  }
  return "unknown status";
}

fsdprun_status_t
fsdprun_program_create_from_file(const char *path,
                                 const fsdprun_options_t *options,
                                 fsdprun_program_t **program) {
  if (!path) {
    if (program)
      *program = nullptr;
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "the path is null");
  }
  return create([&] { return Session::openFile(path, loadOptions(options)); },
                options, program);
}

fsdprun_status_t
fsdprun_program_create_from_string(const char *data, size_t size,
                                   const fsdprun_options_t *options,
                                   fsdprun_program_t **program) {
  if (!data) {
    if (program)
      *program = nullptr;
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "the data is null");
  }
  return create(
      [&] {
        return Session::openBuffer(std::string_view(data, size),
                                   loadOptions(options));
      },
      options, program);
}

fsdprun_status_t fsdprun_program_destroy(fsdprun_program_t *p) {
  if (!p)
    return ok();
  {
    std::lock_guard<std::mutex> guard(registryMutex);
    if (!registry().erase(p))
      return failWith(FSDPRUN_ERR_INVALID_HANDLE,
                      "not a live fsdprun program (destroyed twice?)");
  }
  { std::lock_guard<std::mutex> wait(p->mutex); } // a call still running
  delete p;
  return ok();
}

fsdprun_status_t fsdprun_world_size(fsdprun_program_t *p, int64_t *size) {
  return query(p, size,
               [](const fsdprun_program &p) { return p.session->worldSize(); });
}

fsdprun_status_t fsdprun_is_training(fsdprun_program_t *p, int *training) {
  return query(p, training, [](const fsdprun_program &p) {
    return p.session->training() ? 1 : 0;
  });
}

fsdprun_status_t fsdprun_steps_taken(fsdprun_program_t *p, int64_t *steps) {
  return query(p, steps, [](const fsdprun_program &p) {
    return p.session->stepsTaken();
  });
}

fsdprun_status_t fsdprun_num_inputs(fsdprun_program_t *p, int64_t *count) {
  return query(p, count, [](const fsdprun_program &p) {
    return int64_t(p.inputs.size());
  });
}

fsdprun_status_t fsdprun_num_outputs(fsdprun_program_t *p, int64_t *count) {
  return query(p, count, [](const fsdprun_program &p) {
    return int64_t(p.outputs.size());
  });
}

fsdprun_status_t fsdprun_input_info(fsdprun_program_t *p, int64_t index,
                                    const char **name, fsdprun_dtype_t *dtype,
                                    int64_t *rank, const int64_t **shape) {
  return portInfo(p, true, index, name, dtype, rank, shape);
}

fsdprun_status_t fsdprun_output_info(fsdprun_program_t *p, int64_t index,
                                     const char **name, fsdprun_dtype_t *dtype,
                                     int64_t *rank, const int64_t **shape) {
  return portInfo(p, false, index, name, dtype, rank, shape);
}

fsdprun_status_t fsdprun_set_input(fsdprun_program_t *p, const char *name,
                                   const void *data, size_t bytes,
                                   fsdprun_dtype_t dtype, int64_t rank,
                                   const int64_t *shape) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(p, l))
    return s;
  if (!name || (!data && bytes))
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "null name or data");
  if (fsdprun_status_t s = checkInput(*l.p, name, dtype, rank, shape, bytes))
    return s;
  std::string_view view(static_cast<const char *>(data), bytes);
  if (Error e = l.p->session->setInput(name, dtypeName(dtype),
                                       Span<const int64_t>(shape, size_t(rank)),
                                       view)) {
    bool busy = false;
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, consume(std::move(e), busy));
  }
  return ok();
}

fsdprun_status_t fsdprun_run(fsdprun_program_t *p,
                             const fsdprun_run_options_t *options) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(p, l))
    return s;
  if (options && options->steps < 1)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "steps must be at least 1");
  auto result = l.p->session->run(runOptions(options));
  if (!result) {
    bool busy = false;
    std::string msg = consume(result.takeError(), busy);
    return failWith(
        l.p->session->usable() ? FSDPRUN_ERR_RUN : FSDPRUN_ERR_UNUSABLE, msg);
  }
  l.p->last = std::move(*result);
  return ok();
}

fsdprun_status_t fsdprun_output_shape(fsdprun_program_t *p, const char *name,
                                      int64_t *rank, const int64_t **shape) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(p, l))
    return s;
  const HostArray *out = nullptr;
  if (fsdprun_status_t s = lastOutput(*l.p, name, out))
    return s;
  if (rank)
    *rank = int64_t(out->shape.size());
  if (shape)
    *shape = out->shape.data();
  return ok();
}

fsdprun_status_t fsdprun_get_output(fsdprun_program_t *p, const char *name,
                                    void *data, size_t bytes) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(p, l))
    return s;
  const HostArray *out = nullptr;
  if (fsdprun_status_t s = lastOutput(*l.p, name, out))
    return s;
  if (bytes != out->data.size())
    return failWith(FSDPRUN_ERR_SHAPE, "output '" + out->name + "' has " +
                                           std::to_string(out->data.size()) +
                                           " bytes, not " +
                                           std::to_string(bytes));
  if (!data && bytes)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "the data pointer is null");
  std::copy(out->data.begin(), out->data.end(), static_cast<char *>(data));
  return ok();
}

fsdprun_status_t fsdprun_write_outputs(fsdprun_program_t *p, const char *dir) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(p, l))
    return s;
  if (!dir || !*dir)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "the directory is null");
  if (!l.p->last)
    return failWith(FSDPRUN_ERR_ORDER, "no run has completed yet");
  if (!l.p->last->isReporter)
    return failWith(FSDPRUN_ERR_ORDER, "outputs are on rank 0 only");
  if (Error e = writeOutputs(*l.p->last, dir)) {
    bool busy = false;
    return failWith(FSDPRUN_ERR_RUN, consume(std::move(e), busy));
  }
  return ok();
}

fsdprun_status_t fsdprun_report_json(fsdprun_program_t *p, const char **json) {
  Locked l;
  if (fsdprun_status_t s = lockProgram(p, l))
    return s;
  if (!json)
    return failWith(FSDPRUN_ERR_INVALID_ARGUMENT, "null result pointer");
  if (!l.p->last)
    return failWith(FSDPRUN_ERR_ORDER, "no run has completed yet");
  l.p->json = toJSON(*l.p->last);
  *json = l.p->json.c_str();
  return ok();
}

} // extern "C"
