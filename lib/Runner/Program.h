//===- Program.h - the entry of a step, as the runner sees it -------------===//
//
// The arguments and results of an entry as the compiler recorded them in
// the step's manifest (Manifest.h): plain values, no MLIR. The JIT and
// fsdp-compile write the manifest from the lowered module's
// `fsdp.signatures` (ManifestWriter.h, which checks the lowered functions
// against it); the runner reads it back here, checking it again as a file
// it does not trust.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_PROGRAM_H
#define FSDP_RUNNER_PROGRAM_H

#include "fsdp/Layout/LayoutMath.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fsdp::run {

/// One argument or result of the entry, as recorded by the compiler.
struct Port {
  std::string name;
  std::string dtype;                // numpy's: "<f4", "<f8", "<u2" (bf16), ...
  int64_t elementBytes = 1;         // bytes of one element
  std::vector<int64_t> shape;       // what the rank's function sees (slot)
  std::vector<int64_t> globalShape; // the full tensor
  std::optional<::fsdp::layout::Layout> layout;
  std::string layoutText; // the #fsdp.layout as written ("" without one)
  // The training contract (docs/SEMANTICS.md): a result that becomes an
  // argument of the next step, an optimizer state argument, "lr"/"step".
  std::optional<int64_t> updateOf, stateOf;
  std::string optim;
  bool isLoss = false;
  /// A fed-back argument without a layout: state each rank keeps for
  /// itself (batch-norm running statistics): every rank starts from the
  /// same value, the runner reports rank 0's.
  bool rankLocal = false;
  /// An argument the step never writes (the manifest's `read_only`): its
  /// buffer holds the same value after a step.
  bool readOnly = false;
  int64_t rank() const { return int64_t(shape.size()); }
  int64_t elements() const { return ::fsdp::layout::product(shape); }
  int64_t globalElements() const {
    return ::fsdp::layout::product(globalShape);
  }
  int64_t slotBytes() const { return elements() * elementBytes; }
  bool isF32() const { return dtype == "<f4"; }
  bool isF64() const { return dtype == "<f8"; }
  /// Words of its strided memref descriptor (pointers, offset, sizes,
  /// strides).
  int64_t descriptorWords() const { return 3 + 2 * rank(); }
};

/// The static memory of the entry on one rank (fsdp-assign-buffers'
/// `#fsdp.memory_plan`): its arena, the peak of the static buffers outside
/// it, the number of planned buffers and the largest ones.
struct MemoryPlan {
  int64_t arenaBytes = 0, outsideBytes = 0, buffers = 0;
  std::vector<int64_t> largest;
  int64_t peakBytes() const { return arenaBytes + outsideBytes; }
};

/// A step lowered with compute=gpu (`fsdp.gpu`): its buffers are device
/// memory, its work is enqueued on the rank's compute stream and its
/// collectives need an nccl communicator (docs/GPU.md, "Running on GPUs").
struct GpuStep {
  bool tf32 = false;      // fsdp.gpu_tf32: f32 GEMMs may use TF32
  bool emulation = false; // fsdp.gpu_emulation: kernels are host functions
};

struct Program {
  std::string entry;
  /// The symbol of the packed C interface wrapper the runner calls
  /// (`_mlir__mlir_ciface_<entry>`, StepCode.h).
  std::string symbol;
  std::vector<int64_t> meshShape;
  std::vector<std::string> axisNames;
  std::vector<Port> args, results;
  /// Per argument: the result fed back into it after each training step,
  /// or -1.
  std::vector<int64_t> fedBy;
  /// Its memory plan, when it was compiled with one.
  std::optional<MemoryPlan> plan;
  /// Set for a compute=gpu step.
  std::optional<GpuStep> gpu;
  int64_t meshSize() const { return ::fsdp::layout::product(meshShape); }
  /// A training step: some result has fsdp.update_of.
  bool training() const {
    for (int64_t r : fedBy)
      if (r >= 0)
        return true;
    return false;
  }
};

/// Whether `name` can be a file stem inside --inputs/--outputs (the
/// dialect's rule for every argument and result name): not empty, no
/// leading '.', no "..", no '/' or '\', no control character.
bool isSafeName(std::string_view name);

/// The bytes of one element of numpy's type string `dtype` among those a
/// port may have, or 0.
int64_t dtypeBytes(std::string_view dtype);

} // namespace fsdp::run

#endif
