//===- Inputs.h - the global inputs of a run ---------------------*- C++
//-*-===//
//
// Every argument of the entry gets one global value per step: the same
// array every step, one slice per step along a leading dimension (global
// step g reads slice g), or one file per step (`<name>/<g>.npy`, read when
// the step runs so that a data set need not fit in memory). A per-step
// file is read once per process however many rank threads need it; each
// rank takes its own rows.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_INPUTS_H
#define FSDP_RUNNER_INPUTS_H

#include "Npy.h"
#include "Program.h"

#include "fsdp/Runner/Support.h"

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::run {

/// A global value of one step, shared by the rank threads that read it.
using StepValue = std::shared_ptr<const npy::Array>;

/// One input of a run.
class StepInput {
public:
  StepInput() = default;
  StepInput(const StepInput &) = delete;
  StepInput(StepInput &&) = default;
  StepInput &operator=(StepInput &&) = default;
  /// The same value every step (and the start of a fed-back argument).
  static StepInput constant(std::string name, npy::Array array);
  /// One slice per step along a leading dimension of `array`.
  static StepInput stacked(std::string name, npy::Array array);
  /// One file per step in `dir`; `shape`/`descr` are every file's.
  static StepInput perStepFiles(std::string name, std::string dir,
                                std::vector<int64_t> shape, std::string descr,
                                int64_t readers);

  /// The global bytes of step `step`. `hold` keeps a per-step file's
  /// array alive until the caller is done with it.
  Expected<const char *> at(int64_t step, StepValue &hold) const;
  /// The value of a fed-back argument or of an input without steps.
  const char *first() const { return array.data.data(); }
  bool fromFiles() const { return !stepDir.empty(); }
  /// The same value every step (not one slice or file per step).
  bool constantValue() const { return stepDir.empty() && stepBytes == 0; }
  /// Where a constant value comes from, to tell whether two runs read the
  /// same one: its file's identity (path, inode, size, modification time),
  /// "memory" or "zeros"; "" when unknown.
  const std::string &origin() const { return source; }
  /// (Both take and return the input by value, moved: a copy would copy
  /// the value, a mapped file included.)
  StepInput from(std::string where) && {
    source = std::move(where);
    return std::move(*this);
  }
  /// A constant value whose C-order data is at `offset` in `path`.
  StepInput fromFile(const std::string &path, uint64_t offset) &&;
  /// Maps rank `rank`'s buffer of `p` (which must not write it) from the
  /// value's file, without copying, when it is one contiguous run of it;
  /// false otherwise.
  bool mapShard(const Port &p, int64_t rank, Bytes &out) const;
  /// Per-step files read so far (each once per process).
  int64_t filesRead() const;

  static std::string stepFile(const std::string &dir, int64_t step);

private:
  /// A per-step file, read by the first rank that needs it and dropped
  /// when every reader of this process has taken it.
  struct Shared {
    std::mutex mutex;
    std::condition_variable ready;
    struct Entry {
      bool loading = true;
      StepValue value;
      std::string error;
      int64_t taken = 0;
    };
    std::map<int64_t, Entry> steps;
    int64_t reads = 0;
  };

  std::string name;
  npy::Array array; // the value, or (per-step files) the shape and descr
  int64_t stepBytes = 0;
  std::string stepDir;
  int64_t readers = 1;
  std::shared_ptr<Shared> shared;
  std::string source, file;
  uint64_t fileOffset = 0;

  Expected<StepValue> readStep(int64_t step) const;
};

/// Which arguments' shards a run cuts once and keeps from run to run: the
/// read-only ones (Port::readOnly) that are not fed back and have a
/// constant value of a known origin. `origins` holds, per argument, the
/// origin of the value the kept shards hold ("" none) and is updated for
/// this run; `current` says which kept shards already hold this run's.
std::vector<bool> keptArguments(const Program &prog,
                                const std::vector<StepInput> &inputs,
                                std::vector<std::string> &origins,
                                std::vector<bool> &current);

/// Where the inputs of a run come from.
struct InputSources {
  const std::vector<std::string> *dirs = nullptr;
  /// Inputs set in memory, by argument index (take precedence).
  const std::map<size_t, npy::Array> *memory = nullptr;
};

/// The inputs of global steps [firstStep, endStep) of `prog`, checked
/// against its signature (every per-step file's header included). A
/// fed-back argument has its global shape, or starts at zeros. Arguments
/// not `wanted` (fed-back state the caller already holds) are left empty.
/// `readers`: the ranks of this process that read each per-step file.
Expected<std::vector<StepInput>> loadInputs(const Program &prog,
                                            const InputSources &sources,
                                            const std::vector<bool> &wanted,
                                            int64_t firstStep, int64_t endStep,
                                            int64_t readers);

/// Whether a fed-back argument without a value starts at zeros: optimizer
/// state and the step count (docs/SEMANTICS.md, training).
bool startsAtZero(const Port &p);

/// The global shape of an input: its global type's, the batch times the
/// world size without a layout.
Expected<std::vector<int64_t>> globalInputShape(const Port &p, int64_t world);

} // namespace fsdp::run

#endif
