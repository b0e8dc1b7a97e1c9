//===- RuntimeFunctions.h - the symbols lowered code calls ------*- C++ -*-===//
//
// Every external function lowered code calls, from one table
// (RuntimeFunctions.def, checked against the C headers at compile time):
// passes name the entry and pass its arguments; the callee's name and types
// come from the table, as upstream's FunctionCallBuilder does for the GPU
// runtime.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_ABI_RUNTIMEFUNCTIONS_H
#define FSDP_ABI_RUNTIMEFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {

/// An entry of the table: fsdprt_jit_<name> is `name`, fsdprt_gpu_<name> is
/// `gpu_<name>`, cblas_<name> is `cblas_<name>`.
enum class RuntimeFunction {
#define RUNTIME_FUNCTION(id, ...) id,
#include "fsdp/ABI/RuntimeFunctions.def"
};

/// One argument of a runtime call: a value of the entry's argument type, or
/// an integer that the call materializes as a constant of that type.
class RuntimeArg {
public:
  RuntimeArg(Value value) : value(value) {}
  RuntimeArg(int64_t constant) : constant(constant) {}

  Value materialize(OpBuilder &b, Location loc, Type type) const;

private:
  Value value;
  int64_t constant = 0;
};

/// The C name of `fn` (fsdprt_jit_..., fsdprt_gpu_..., cblas_...).
StringRef getRuntimeFunctionName(RuntimeFunction fn);

/// The width in bits with which the runtime reads an integer index operand
/// of element type `element` (index is 64 bits on its hosts), or 0 where the
/// runtime takes no such indices (it reads i32, i64 and index).
int64_t runtimeIndexBits(Type element);

/// The runtime's code (fsdprt_types.h `fsdprt_dtype_t`) of an element type,
/// if the runtime has one.
std::optional<int32_t> runtimeDtypeCode(Type element);

/// The function type of `fn` (pointers are !llvm.ptr).
FunctionType getRuntimeFunctionType(MLIRContext *ctx, RuntimeFunction fn);

/// A private declaration of `fn` at `b`'s insertion point.
func::FuncOp createRuntimeDeclaration(OpBuilder &b, Location loc,
                                      RuntimeFunction fn);

/// The private declaration of `fn` in `module`, created at its end the first
/// time.
func::FuncOp declareRuntimeFunction(ModuleOp module, RuntimeFunction fn);

/// The declaration of `fn` as an llvm.func (for callers already in the LLVM
/// dialect: global constructors), created at the module's end the first
/// time.
LLVM::LLVMFuncOp declareLLVMRuntimeFunction(ModuleOp module,
                                            RuntimeFunction fn);

/// Declares `fn` (once) and calls it with `args` (checked against the
/// table) at `b`'s insertion point.
func::CallOp createRuntimeCall(OpBuilder &b, Location loc, RuntimeFunction fn,
                               ArrayRef<RuntimeArg> args);

} // namespace mlir::fsdp

#endif
