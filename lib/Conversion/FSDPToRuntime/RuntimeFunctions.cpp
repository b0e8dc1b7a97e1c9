//===- RuntimeFunctions.cpp - calls to fsdprt entry points ----------------===//

#include "RuntimeFunctions.h"

#include "fsdprt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The C ABI types of the entry points (unscoped: the table names them).
enum AbiType { Void, Ptr, I32, I64 };

struct RuntimeFunctionInfo {
  StringLiteral name;
  AbiType result;
  ArrayRef<AbiType> args;
};

/// The ABI type of a C parameter or result type.
template <typename T> constexpr AbiType abiTypeOf() {
  if constexpr (std::is_void_v<T>)
    return AbiType::Void;
  else if constexpr (std::is_pointer_v<T>)
    return AbiType::Ptr;
  else if constexpr (std::is_same_v<T, int32_t>)
    return AbiType::I32;
  else {
    static_assert(std::is_same_v<T, int64_t>, "not an fsdprt ABI type");
    return AbiType::I64;
  }
}

/// Whether the C function type `R(A...)` has the table's result and
/// arguments.
template <typename R, typename... A, size_t N>
constexpr bool matchesDeclaration(R (*)(A...), AbiType result,
                                  const AbiType (&args)[N]) {
  if (sizeof...(A) != N || abiTypeOf<R>() != result)
    return false;
  AbiType declared[] = {abiTypeOf<A>()...};
  for (size_t i = 0; i < N; ++i)
    if (declared[i] != args[i])
      return false;
  return true;
}

// Each entry's argument list, checked against its fsdprt.h declaration.
#define FSDPRT_JIT_FUNCTION(name, result, ...)                                 \
  constexpr AbiType name##Args[] = {__VA_ARGS__};                              \
  static_assert(matchesDeclaration(&fsdprt_jit_##name, result, name##Args),    \
                "RuntimeFunctions.def: fsdprt_jit_" #name                      \
                " does not match its declaration in fsdprt.h");
#include "RuntimeFunctions.def"

const RuntimeFunctionInfo kRuntimeFunctions[] = {
#define FSDPRT_JIT_FUNCTION(name, result, ...)                                 \
  {"fsdprt_jit_" #name, result, name##Args},
#include "RuntimeFunctions.def"
};

const RuntimeFunctionInfo &infoOf(RuntimeFunction fn) {
  return kRuntimeFunctions[static_cast<size_t>(fn)];
}

Type typeOf(MLIRContext *ctx, AbiType type) {
  switch (type) {
  case AbiType::Ptr:
    return LLVM::LLVMPointerType::get(ctx);
  case AbiType::I32:
    return IntegerType::get(ctx, 32);
  case AbiType::I64:
    return IntegerType::get(ctx, 64);
  case AbiType::Void:
    break;
  }
  return {};
}

FunctionType functionTypeOf(MLIRContext *ctx, const RuntimeFunctionInfo &info) {
  SmallVector<Type> args, results;
  for (AbiType a : info.args)
    args.push_back(typeOf(ctx, a));
  if (info.result != AbiType::Void)
    results.push_back(typeOf(ctx, info.result));
  return FunctionType::get(ctx, args, results);
}

} // namespace

Value RuntimeArg::materialize(OpBuilder &b, Location loc, Type type) const {
  if (value) {
    assert(value.getType() == type && "runtime argument of the wrong type");
    return value;
  }
  return arith::ConstantIntOp::create(b, loc, type, constant).getResult();
}

StringRef mlir::fsdp::getRuntimeFunctionName(RuntimeFunction fn) {
  return infoOf(fn).name;
}

func::FuncOp mlir::fsdp::declareRuntimeFunction(ModuleOp module,
                                                RuntimeFunction fn) {
  const RuntimeFunctionInfo &info = infoOf(fn);
  if (auto f = module.lookupSymbol<func::FuncOp>(info.name))
    return f;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), info.name,
                                functionTypeOf(module.getContext(), info));
  f.setPrivate();
  return f;
}

func::CallOp mlir::fsdp::createRuntimeCall(OpBuilder &b, Location loc,
                                           RuntimeFunction fn,
                                           ArrayRef<RuntimeArg> args) {
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  func::FuncOp callee = declareRuntimeFunction(module, fn);
  ArrayRef<Type> types = callee.getFunctionType().getInputs();
  assert(types.size() == args.size() && "runtime call of the wrong arity");
  SmallVector<Value> operands;
  for (auto [arg, type] : llvm::zip_equal(args, types))
    operands.push_back(arg.materialize(b, loc, type));
  return func::CallOp::create(b, loc, callee, operands);
}
