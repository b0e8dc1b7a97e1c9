//===- FSDPSignature.h - the compiler-to-runner contract --------*- C++ -*-===//
//
// A lowered module records, for each step, the `#fsdp.signature` of its
// arguments and results (`#fsdp.port`s) in the module attribute
// `fsdp.signatures`: convert-fsdp-to-runtime writes it with
// buildSignature/setSignatures, the runner reads it with getSignatures, and
// the dialect verifies it (the rules of FSDPAttrs.td, plus each layout
// against its mesh).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPSIGNATURE_H
#define FSDP_DIALECT_FSDP_IR_FSDPSIGNATURE_H

#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace mlir::fsdp {

/// The rule for the name of an argument or result (`fsdp.name`, a port's
/// name): a file stem that stays inside the runner's --inputs / --outputs.
inline constexpr llvm::StringLiteral kSafeNameRule =
    "a name must be a file stem: not empty, no '/', '\\' or '..', no "
    "leading '.', no control characters";
/// Whether `name` follows kSafeNameRule.
bool isSafeName(llvm::StringRef name);

/// Whether a port may have elements of `type`: those the runner reads and
/// writes as `.npy` (f16, bf16, f32, f64, 8-bit, i32, i64).
bool isPortElementType(Type type);

/// The `fsdp.signatures` of `module`: entry name -> SignatureAttr (the
/// dialect verified it), or null when the module has none.
DictionaryAttr getSignatures(ModuleOp module);

/// The signature of `func` described by the fsdp attributes of its
/// arguments and results (`fsdp.name`, `fsdp.global_type`, `fsdp.layout`,
/// `fsdp.update_of`, `fsdp.state_of`, `fsdp.optim`, `fsdp.loss`); tensors
/// and memrefs alike. Null when no argument or result has an fsdp
/// attribute; failure, reported at `func`, when one cannot be a port.
FailureOr<SignatureAttr> buildSignature(FunctionOpInterface func);

/// Records `entries` (entry name -> SignatureAttr) as `fsdp.signatures`.
void setSignatures(ModuleOp module, ArrayRef<NamedAttribute> entries);

/// Checks the value of `fsdp.signatures` on `op`: a dictionary of
/// signatures whose layouts name meshes visible from `op`, are valid for
/// their global types and have the port's type as their slot.
LogicalResult verifySignatures(Operation *op, Attribute value);

} // namespace mlir::fsdp

#endif
