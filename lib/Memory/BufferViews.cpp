//===- BufferViews.cpp - runtime memory as buffers ------------------------===//

#include "fsdp/Memory/BufferViews.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

Value mlir::fsdp::pointerAsBuffer(OpBuilder &b, Location loc, Value ptr,
                                  int64_t bytes) {
  Type i64 = b.getI64Type();
  Type sizes = LLVM::LLVMArrayType::get(i64, 1);
  auto descType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), {ptr.getType(), ptr.getType(), i64, sizes, sizes});
  auto word = [&](int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  // (allocated, aligned, offset, sizes[1], strides[1])
  Value desc = LLVM::PoisonOp::create(b, loc, descType);
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{0});
  desc = LLVM::InsertValueOp::create(b, loc, desc, ptr, ArrayRef<int64_t>{1});
  desc =
      LLVM::InsertValueOp::create(b, loc, desc, word(0), ArrayRef<int64_t>{2});
  desc = LLVM::InsertValueOp::create(b, loc, desc, word(bytes),
                                     ArrayRef<int64_t>{3, 0});
  desc = LLVM::InsertValueOp::create(b, loc, desc, word(1),
                                     ArrayRef<int64_t>{4, 0});
  auto type = MemRefType::get({bytes}, b.getI8Type());
  return UnrealizedConversionCastOp::create(b, loc, type, desc).getResult(0);
}
