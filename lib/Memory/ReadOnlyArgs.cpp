//===- ReadOnlyArgs.cpp - the step arguments no step writes ---------------===//
//
// The runner copies its shard of every argument into the rank's buffer
// before each step, because a step may update an argument in place (the
// bufferization reuses argument buffers). An argument the step provably
// never writes -- a frozen parameter, a batch the step only reads -- can be
// copied once per session instead. This pass proves it on the bufferized
// step, where every write is an operation on a memref: it follows each
// argument's aliases to their uses, into the functions it is passed to,
// and calls anything it cannot account for a write.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Memory/ReadOnlyArgs.h"
#include "fsdp/Dialect/FSDP/IR/FSDPConstants.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Memory/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMARKREADONLYARGS
#include "fsdp/Memory/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Which arguments of a function each of its results may alias: argument
/// indices, or every argument (`all`).
struct ResultSources {
  bool all = false;
  llvm::SmallDenseSet<unsigned, 4> args;
};

/// Whether the arguments of functions are written, memoized per argument.
class WriteAnalysis {
public:
  explicit WriteAnalysis(ModuleOp module) : symbols(module) {}

  /// Whether `func`'s argument `index` may be written, freed or escape (its
  /// address taken) in `func` or a function it calls. An entry's argument
  /// also escapes when returned; a callee's is followed into its caller
  /// through the call's results instead (resultMayAlias).
  bool argMayBeWritten(func::FuncOp func, unsigned index, bool entry) {
    auto key = std::make_tuple(func.getOperation(), index, unsigned(entry));
    auto [it, fresh] = known.try_emplace(key, true);
    // A recursive call meets its own question: a possible write.
    if (!fresh)
      return it->second;
    bool written = mayBeWritten(func.getArgument(index), entry);
    known[key] = written;
    return written;
  }

private:
  /// Whether the buffer `root`, or any alias of it, may be written.
  bool mayBeWritten(Value root, bool entry) {
    llvm::SetVector<Value> aliases;
    aliases.insert(root);
    for (size_t i = 0; i < aliases.size(); ++i)
      for (OpOperand &use : aliases[i].getUses()) {
        if (useMayWrite(use, entry))
          return true;
        // Whatever buffer the user returns may look into this one; a
        // call's results only where its callee may return this argument.
        for (OpResult result : use.getOwner()->getResults())
          if (isa<BaseMemRefType>(result.getType()) &&
              resultMayAlias(result, use))
            aliases.insert(result);
      }
    return false;
  }

  /// Whether the call result `result` may alias the operand `use` of the
  /// same operation (any result of any other operation may).
  bool resultMayAlias(OpResult result, OpOperand &use) {
    auto call = dyn_cast<func::CallOp>(result.getOwner());
    if (!call)
      return true;
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee || callee.isExternal())
      return true;
    const ResultSources &from = sourcesOf(callee)[result.getResultNumber()];
    return from.all || from.args.contains(use.getOperandNumber());
  }

  /// Per result of `func`, the arguments it may alias, memoized.
  const std::vector<ResultSources> &sourcesOf(func::FuncOp func) {
    auto [it, fresh] = sources.try_emplace(func.getOperation());
    if (!fresh)
      return it->second;
    // A recursive call meets an unfinished summary: every argument.
    it->second.assign(func.getNumResults(), ResultSources{true, {}});
    std::vector<ResultSources> found(func.getNumResults());
    func.walk([&](func::ReturnOp ret) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        if (isa<BaseMemRefType>(v.getType()))
          addSources(v, func, found[i]);
    });
    sources[func.getOperation()] = found;
    return sources[func.getOperation()];
  }

  /// Adds to `out` the arguments of `func` that `v` may alias: the
  /// argument it is, else those of every buffer the operation that defines
  /// it takes (through a call, those its callee may return). A value from
  /// a region (a loop's iter_args, a branch) may alias any argument.
  void addSources(Value v, func::FuncOp func, ResultSources &out) {
    llvm::SmallVector<Value> work{v};
    llvm::DenseSet<Value> seen;
    while (!work.empty() && !out.all) {
      Value x = work.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        if (arg.getOwner() == &func.getBody().front())
          out.args.insert(arg.getArgNumber());
        else
          out.all = true;
        continue;
      }
      Operation *def = x.getDefiningOp();
      if (def->getNumRegions() != 0) {
        out.all = true;
        continue;
      }
      for (OpOperand &operand : def->getOpOperands())
        if (isa<BaseMemRefType>(operand.get().getType()) &&
            resultMayAlias(cast<OpResult>(x), operand))
          work.push_back(operand.get());
    }
  }

  /// Whether the use `use` of a buffer may write it (or let it escape).
  bool useMayWrite(OpOperand &use, bool entry) {
    Operation *user = use.getOwner();
    Value v = use.get();
    if (auto call = dyn_cast<func::CallOp>(user)) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      return !callee || callee.isExternal() ||
             argMayBeWritten(callee, use.getOperandNumber(), false);
    }
    if (auto collective = dyn_cast<CollectiveOpInterface>(user))
      return !collective.isOnBuffers() ||
             v != collective.getCollectiveInput() ||
             v == collective.getCollectiveOutput();
    // Returned from a callee: its callers follow the call's results. From
    // an entry, yielded or branched with: another value holds it.
    if (!entry && isa<func::ReturnOp>(user))
      return false;
    if (user->hasTrait<OpTrait::ReturnLike>() ||
        user->hasTrait<OpTrait::IsTerminator>())
      return true;
    if (isa<memref::ExtractAlignedPointerAsIndexOp>(user))
      return true; // the address escapes as an integer
    auto effects = dyn_cast<MemoryEffectOpInterface>(user);
    if (!effects)
      return true;
    SmallVector<MemoryEffects::EffectInstance> all;
    effects.getEffects(all);
    // A write or free of this buffer, or of memory the op does not name.
    return llvm::any_of(all, [&](const MemoryEffects::EffectInstance &e) {
      if (isa<MemoryEffects::Read>(e.getEffect()))
        return false;
      Value on = e.getValue();
      return on == v ||
             (!on && isa<SideEffects::DefaultResource>(e.getResource()));
    });
  }

  SymbolTable symbols;
  llvm::DenseMap<std::tuple<Operation *, unsigned, unsigned>, bool> known;
  llvm::DenseMap<Operation *, std::vector<ResultSources>> sources;
};

/// Whether some argument or result of `func` has an fsdp attribute: an
/// entry of the runner (convert-fsdp-to-runtime records its signature).
bool isEntry(func::FuncOp func) {
  auto annotated = [](DictionaryAttr dict) {
    return dict && llvm::any_of(dict, [](NamedAttribute n) {
             return n.getName().getValue().starts_with(kAttrPrefix);
           });
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (annotated(func.getArgAttrDict(i)))
      return true;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (annotated(func.getResultAttrDict(i)))
      return true;
  return false;
}

struct FSDPMarkReadOnlyArgsPass
    : public mlir::fsdp::impl::FSDPMarkReadOnlyArgsBase<
          FSDPMarkReadOnlyArgsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    WriteAnalysis analysis(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !isEntry(func))
        continue;
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        func.removeArgAttr(i, kReadOnlyAttrName);
        if (!isa<BaseMemRefType>(func.getArgument(i).getType()) ||
            analysis.argMayBeWritten(func, i, /*entry=*/true))
          continue;
        func.setArgAttr(i, kReadOnlyAttrName, UnitAttr::get(&getContext()));
        ++numReadOnly;
      }
    }
  }
};

} // namespace
