//===- Results.h - a run's results, assembled or written by the ranks
//------===//
//
// What a run hands back: every output's global value from the ranks'
// pieces, their memory and statistics. With RunOptions::outputsDir, a
// sharded result of the threads backend is not assembled in memory and
// written afterwards: its `.npy` file is created at its full size before
// the run, the first replica of each shard writes the elements it owns
// straight into it from the step's result (pwrite: the page cache filled
// once, no global array allocated and zeroed), and the file, once the
// other replicas agree with it, is renamed into place and mapped back as
// the output's value.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_RESULTS_H
#define FSDP_RUNNER_RESULTS_H

#include "RankRun.h"

#include <atomic>
#include <memory>

namespace fsdp::run {

/// The result files the ranks write (see the file's comment).
class OutputFiles {
public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles &) = delete;
  OutputFiles &operator=(const OutputFiles &) = delete;
  /// Removes the temporary files that were not published.
  ~OutputFiles();

  /// Creates the temporary file of output `k`, the global array `port`,
  /// for `<dir>/<name>.npy`.
  Error create(size_t k, const std::string &dir, const Port &port);
  bool has(size_t k) const { return k < files.size() && files[k]; }
  /// Writes `bytes` bytes at byte `offset` of output `k`'s data; any thread.
  void write(size_t k, int64_t offset, const char *data, int64_t bytes);
  /// Output `k`'s data, written by every rank, mapped read-only.
  Error map(size_t k, Bytes &out);
  /// Renames every file into place; the final path of output `k`.
  Error publish();
  std::string path(size_t k) const { return has(k) ? files[k]->path : ""; }

private:
  struct File {
    int fd = -1;
    std::string tmp, path;
    uint64_t dataOffset = 0;
    std::atomic<bool> failed{false};
    std::string error;
  };
  std::vector<std::unique_ptr<File>> files;
};

/// The outputs, memory and statistics of every rank, assembled. `placed`
/// holds, per output, the global array its first replicas placed their
/// elements into (or empty: assembled from the pieces).
Error assembleResult(const std::vector<Output> &outputs,
                     const std::vector<RankOutcome> &runs, bool keepAllRanks,
                     std::vector<Bytes> &placed, RunResult &result);

} // namespace fsdp::run

#endif
