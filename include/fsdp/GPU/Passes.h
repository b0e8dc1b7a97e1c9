//===- Passes.h - GPU compute lowering passes -------------------*- C++ -*-===//

#ifndef FSDP_GPU_PASSES_H
#define FSDP_GPU_PASSES_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {
/// The CUDA toolkit root when no option names one: $CUDA_HOME, else
/// /usr/local/cuda.
std::string defaultCudaPath();

/// On a bf16 contraction (fsdp-gpu-gemm-results): its sum is carried in f32
/// and rounded to bf16 once, as `fsdprt_gpu_gemm_bf16` computes it, not
/// rounded at every step as the body reads. Only a cuBLAS gemm may compute
/// it (fsdp-linalg-to-cublas fails on one it cannot plan).
constexpr llvm::StringLiteral kF32AccumulationAttrName =
    "fsdp.f32_accumulation";

#define GEN_PASS_DECL
#include "fsdp/GPU/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

#endif
