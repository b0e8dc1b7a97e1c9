//===- RuntimeFunctions.h - calls to fsdprt entry points --------*- C++ -*-===//
//
// The runtime entry points lowered code calls, from one table
// (RuntimeFunctions.def): call sites name the entry and pass its arguments;
// the callee's name and types come from the table, as upstream's
// FunctionCallBuilder does for the GPU runtime.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_CONVERSION_FSDPTORUNTIME_RUNTIMEFUNCTIONS_H
#define FSDP_CONVERSION_FSDPTORUNTIME_RUNTIMEFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {

/// An fsdprt_jit_* entry point.
enum class RuntimeFunction {
#define FSDPRT_JIT_FUNCTION(name, ...) name,
#include "RuntimeFunctions.def"
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

/// The C name of `fn` (fsdprt_jit_...).
StringRef getRuntimeFunctionName(RuntimeFunction fn);

/// The private declaration of `fn` in `module`, created at its end the first
/// time.
func::FuncOp declareRuntimeFunction(ModuleOp module, RuntimeFunction fn);

/// Declares `fn` (once) and calls it with `args` (checked against the
/// table) at `b`'s insertion point.
func::CallOp createRuntimeCall(OpBuilder &b, Location loc, RuntimeFunction fn,
                               ArrayRef<RuntimeArg> args);

} // namespace mlir::fsdp

#endif
