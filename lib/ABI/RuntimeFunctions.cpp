//===- RuntimeFunctions.cpp - the symbols lowered code calls --------------===//

#include "fsdp/ABI/RuntimeFunctions.h"

#include "fsdprt.h"
#include "fsdprt_gpu.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <array>
#include <optional>
#include <type_traits>

#if __has_include(<cblas.h>)
#include <cblas.h>
#define FSDP_HAVE_CBLAS_H 1
#endif

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The C ABI types of the entry points (unscoped: the table names them).
enum AbiType { Void, Ptr, I32, I64, F32, F64 };

struct RuntimeFunctionInfo {
  StringLiteral name;
  /// The result, then the arguments.
  ArrayRef<AbiType> signature;
};

/// The ABI type of a C parameter or result type.
template <typename T> constexpr AbiType abiTypeOf() {
  if constexpr (std::is_void_v<T>)
    return AbiType::Void;
  else if constexpr (std::is_pointer_v<T>)
    return AbiType::Ptr;
  else if constexpr (std::is_same_v<T, float>)
    return AbiType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return AbiType::F64;
  else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    // C enums (fsdprt_status_t, CBLAS_ORDER) pass as their 32-bit int.
    static_assert(sizeof(T) == 4 || sizeof(T) == 8,
                  "not an ABI type of the runtime table");
    return sizeof(T) == 4 ? AbiType::I32 : AbiType::I64;
  } else {
    static_assert(sizeof(T) == 0, "not an ABI type of the runtime table");
    return AbiType::Void;
  }
}

/// Whether the C function type `R(A...)` has the table's result and
/// arguments.
template <typename R, typename... A, size_t N>
constexpr bool matchesDeclaration(R (*)(A...), const AbiType (&signature)[N]) {
  if (sizeof...(A) + 1 != N || abiTypeOf<R>() != signature[0])
    return false;
  std::array<AbiType, sizeof...(A)> declared = {abiTypeOf<A>()...};
  for (size_t i = 0; i < declared.size(); ++i)
    if (declared[i] != signature[i + 1])
      return false;
  return true;
}

// Each entry's signature, checked against its C declaration.
#define RUNTIME_FUNCTION(id, symbol, ...)                                      \
  constexpr AbiType id##Signature[] = {__VA_ARGS__};                           \
  static_assert(matchesDeclaration(&symbol, id##Signature),                    \
                "RuntimeFunctions.def: " #symbol                               \
                " does not match its C declaration");
#ifndef FSDP_HAVE_CBLAS_H
// Without cblas.h (the BLAS is found when the step is linked) the sgemm and
// dgemm lines go unchecked.
#define CBLAS_FUNCTION(name, ...)                                              \
  constexpr AbiType cblas_##name##Signature[] = {__VA_ARGS__};
#endif
#include "fsdp/ABI/RuntimeFunctions.def"

const RuntimeFunctionInfo kRuntimeFunctions[] = {
#define RUNTIME_FUNCTION(id, symbol, ...) {#symbol, id##Signature},
#include "fsdp/ABI/RuntimeFunctions.def"
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
  case AbiType::F32:
    return Float32Type::get(ctx);
  case AbiType::F64:
    return Float64Type::get(ctx);
  case AbiType::Void:
    break;
  }
  return {};
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

FunctionType mlir::fsdp::getRuntimeFunctionType(MLIRContext *ctx,
                                                RuntimeFunction fn) {
  ArrayRef<AbiType> signature = infoOf(fn).signature;
  SmallVector<Type> args, results;
  for (AbiType a : signature.drop_front())
    args.push_back(typeOf(ctx, a));
  if (signature.front() != AbiType::Void)
    results.push_back(typeOf(ctx, signature.front()));
  return FunctionType::get(ctx, args, results);
}

func::FuncOp mlir::fsdp::createRuntimeDeclaration(OpBuilder &b, Location loc,
                                                  RuntimeFunction fn) {
  auto f = func::FuncOp::create(b, loc, getRuntimeFunctionName(fn),
                                getRuntimeFunctionType(b.getContext(), fn));
  f.setPrivate();
  return f;
}

func::FuncOp mlir::fsdp::declareRuntimeFunction(ModuleOp module,
                                                RuntimeFunction fn) {
  if (auto f = module.lookupSymbol<func::FuncOp>(getRuntimeFunctionName(fn)))
    return f;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  return createRuntimeDeclaration(b, module.getLoc(), fn);
}

LLVM::LLVMFuncOp mlir::fsdp::declareLLVMRuntimeFunction(ModuleOp module,
                                                        RuntimeFunction fn) {
  StringRef name = getRuntimeFunctionName(fn);
  if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return f;
  MLIRContext *ctx = module.getContext();
  FunctionType type = getRuntimeFunctionType(ctx, fn);
  Type result =
      type.getNumResults() ? type.getResult(0) : LLVM::LLVMVoidType::get(ctx);
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  return LLVM::LLVMFuncOp::create(
      b, module.getLoc(), name,
      LLVM::LLVMFunctionType::get(result, type.getInputs()));
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

int64_t mlir::fsdp::runtimeIndexBits(Type element) {
  if (element.isIndex())
    return 64;
  if (element.isInteger(32) || element.isInteger(64))
    return element.getIntOrFloatBitWidth();
  return 0;
}

std::optional<int32_t> mlir::fsdp::runtimeDtypeCode(Type t) {
  if (t.isF32())
    return FSDPRT_F32;
  if (t.isF64())
    return FSDPRT_F64;
  if (t.isF16())
    return FSDPRT_F16;
  if (t.isBF16())
    return FSDPRT_BF16;
  if (t.isInteger(32))
    return FSDPRT_I32;
  if (t.isInteger(64))
    return FSDPRT_I64;
  if (t.isUnsignedInteger(8) || t.isSignlessInteger(8) ||
      isa<Float8E4M3FNType, Float8E5M2Type, Float8E8M0FNUType>(t))
    return FSDPRT_U8;
  if (t.isSignedInteger(8))
    return FSDPRT_I8;
  return std::nullopt;
}
