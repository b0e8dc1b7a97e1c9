//===- Results.cpp - a run's results, assembled or written by the ranks
//----===//

#include "Results.h"
#include "Files.h"
#include "Shards.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::run {

OutputFiles::~OutputFiles() {
  for (const std::unique_ptr<File> &f : files)
    if (f) {
      if (f->fd >= 0)
        ::close(f->fd);
      if (!f->tmp.empty())
        ::unlink(f->tmp.c_str());
    }
}

Error OutputFiles::create(size_t k, const std::string &dir, const Port &p) {
  if (files.size() <= k)
    files.resize(k + 1);
  auto f = std::make_unique<File>();
  f->path = dir + "/" + p.name + ".npy";
  f->tmp =
      f->path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(k);
  std::string header = npy::fileHeader(p.dtype, p.globalShape);
  f->dataOffset = header.size();
  f->fd = ::open(f->tmp.c_str(),
                 O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  off_t size = off_t(header.size() + p.globalElements() * p.elementBytes);
  bool ok = f->fd >= 0 &&
            ::pwrite(f->fd, header.data(), header.size(), 0) ==
                ssize_t(header.size()) &&
            ::ftruncate(f->fd, size) == 0;
  std::string why = std::strerror(errno);
  files[k] = std::move(f);
  if (!ok)
    return makeError("cannot write " + files[k]->path + ": " + why);
  return Error::success();
}

void OutputFiles::write(size_t k, int64_t offset, const char *data,
                        int64_t bytes) {
  File &f = *files[k];
  off_t at = off_t(f.dataOffset + uint64_t(offset));
  while (bytes > 0 && !f.failed) {
    ssize_t n = ::pwrite(f.fd, data, size_t(bytes), at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      f.failed = true; // reported by map()
    data += n, bytes -= n, at += n;
  }
}

Error OutputFiles::map(size_t k, Bytes &out) {
  File &f = *files[k];
  if (f.failed)
    return makeError("error writing " + f.path);
  struct stat st;
  std::string error;
  // Not prefaulted: the file's pages are in the page cache, and most of a
  // result written to a file is never read back (fsdp-run reads the loss;
  // a replica's check reads the replicated results only). GPT-2 small's
  // 498 MB of gradients took 0.9 s to map with MAP_POPULATE.
  if (::fstat(f.fd, &st) != 0 ||
      !out.mapFile(f.tmp, f.dataOffset, size_t(st.st_size) - f.dataOffset,
                   error, /*populate=*/false))
    return makeError("cannot read back " + f.path + ": " + error);
  return Error::success();
}

Error OutputFiles::publish() {
  for (const std::unique_ptr<File> &f : files) {
    if (!f)
      continue;
    if (::close(f->fd) != 0 || ::rename(f->tmp.c_str(), f->path.c_str()) != 0)
      return makeError("error writing " + f->path + ": " +
                       std::strerror(errno));
    f->fd = -1;
    f->tmp.clear();
  }
  return Error::success();
}

namespace {

/// The global value of an output from every rank's piece; a stacked
/// output gets a leading step dimension.
Expected<npy::Array> assembleOutput(const Output &o,
                                    const std::vector<const Bytes *> &pieces) {
  if (!o.stacked)
    return assembleResult(*o.port, pieces);
  size_t slot = size_t(o.port->slotBytes());
  size_t steps = slot ? pieces.front()->size() / slot : 0;
  npy::Array all;
  all.descr = o.port->dtype;
  all.shape = o.port->globalShape;
  all.shape.insert(all.shape.begin(), int64_t(steps));
  for (size_t s = 0; s < steps; ++s) {
    std::vector<Bytes> slices;
    for (const Bytes *p : pieces)
      slices.emplace_back(p->begin() + s * slot, p->begin() + (s + 1) * slot);
    std::vector<const Bytes *> ptrs;
    for (const Bytes &v : slices)
      ptrs.push_back(&v);
    auto a = assembleResult(*o.port, ptrs);
    if (!a)
      return a.takeError();
    all.data.insert(all.data.end(), a->data.begin(), a->data.end());
  }
  return all;
}

} // namespace

Error assembleResult(const std::vector<Output> &outputs,
                     const std::vector<RankOutcome> &runs, bool keepAllRanks,
                     std::vector<Bytes> &placed, RunResult &result) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::vector<const Bytes *> pieces;
    for (const RankOutcome &run : runs)
      pieces.push_back(&run.pieces[k]);
    auto a = k < placed.size() && !placed[k].empty()
                 ? assembleResult(*outputs[k].port, pieces, &placed[k])
                 : assembleOutput(outputs[k], pieces);
    if (!a)
      return a.takeError();
    HostArray h{outputs[k].port->name, a->descr,           a->shape,
                std::move(a->data),    outputs[k].stacked, {}};
    if (keepAllRanks && !outputs[k].port->layout && !outputs[k].stacked)
      for (const RankOutcome &run : runs)
        h.perRank.push_back(run.pieces[k]);
    result.outputs.push_back(std::move(h));
  }
  for (const RankOutcome &run : runs) {
    RankMemory m;
    m.peakBytes = run.memory.peakBytes;
    m.allocations = run.memory.allocations;
    m.heldAfterStepBytes = run.heldAfterStep;
    m.arenaBytes = run.arenaBytes;
    if (run.gpu) {
      m.device = run.deviceIndex;
      m.deviceAllocatedBytes = int64_t(run.device.bytes_allocated);
      m.devicePeakBytes = int64_t(run.device.bytes_peak);
      m.deviceLaunches = int64_t(run.device.launches);
      m.deviceGemms = int64_t(run.device.gemms);
      m.deviceAllocations = int64_t(run.device.allocations);
      m.deviceArenaBytes = int64_t(run.device.arena_bytes);
      m.deviceGraphLaunches = int64_t(run.device.graph_launches);
      if (result.cudaGraph.empty())
        result.cudaGraph = run.cudaGraph;
    }
    result.memory.push_back(m);
    result.stats.push_back(commStats(run.stats));
  }
  return Error::success();
}

} // namespace fsdp::run
