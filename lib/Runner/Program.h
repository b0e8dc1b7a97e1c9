//===- Program.h - the entry of a lowered module, as fsdp-run sees it -----===//
//
// The arguments and results of an entry as `fsdp-opt` recorded them in the
// module's `fsdp.signatures`, checked against the lowered function before
// anything is called.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDPRUN_PROGRAM_H
#define FSDP_TOOLS_FSDPRUN_PROGRAM_H

#include "fsdp/Dialect/FSDP/IR/FSDPSignature.h"
#include "fsdp/Layout/LayoutMath.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp::run {

/// One argument or result of the entry, as recorded by the compiler.
struct Port {
  std::string name;
  mlir::RankedTensorType type;       // what the rank's function sees (slot)
  mlir::RankedTensorType globalType; // the full tensor
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
  int64_t elementBytes() const;
  int64_t slotBytes() const { return type.getNumElements() * elementBytes(); }
  /// Words of its strided memref descriptor (pointers, offset, sizes,
  /// strides).
  int64_t descriptorWords() const { return 3 + 2 * type.getRank(); }
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

/// The module attributes of a compute=gpu step (set by the lowering).
inline constexpr llvm::StringLiteral kGpuAttrName = "fsdp.gpu";
inline constexpr llvm::StringLiteral kGpuTf32AttrName = "fsdp.gpu_tf32";
inline constexpr llvm::StringLiteral kGpuEmulationAttrName =
    "fsdp.gpu_emulation";

/// Reads and checks the signature of `entry` (the only entry when empty)
/// and the lowered function against it, then strips every fsdp attribute
/// and mesh so that only the LLVM dialect is left for translation. An
/// error names the entry and the argument or result at fault.
llvm::Expected<Program> loadProgram(mlir::ModuleOp module,
                                    llvm::StringRef entry);

/// numpy's type string for an element type, "" when fsdp-run has none.
std::string npyDescr(mlir::Type type);

/// Whether `name` can be a file stem inside --inputs/--outputs (the
/// dialect's rule for every argument and result name).
using mlir::fsdp::isSafeName;

} // namespace fsdp::run

#endif
