// cuBLAS and NCCL, opened on first use. libfsdprt does not link them: a
// CPU step (or any program that never creates a GPU context or an NCCL
// communicator) does not load them, and loading cuBLAS alone costs about
// 25,000 page faults and a quarter of a second (libcublasLt's static
// initializers). The first GPU context opens cuBLAS and the first NCCL
// communicator (or unique id) opens NCCL, with dlopen; every function the
// runtime calls is one line of the lists below, typed by the library's own
// header (decltype of its declaration). A library that cannot be opened, or
// lacks a function, is an FSDPRT_ERR_UNSUPPORTED status naming it.
//
// Which file is opened: $FSDPRT_CUBLAS_LIBRARY / $FSDPRT_NCCL_LIBRARY when
// set (the only candidate then); else the library the runtime was built
// against (its path at configure time); else the versioned name
// (libcublas.so.<major>, libnccl.so.<major>) through the dynamic loader's
// search (LD_LIBRARY_PATH, the loader's cache).
//
// The CUDA runtime itself is linked statically (cudart_static, its symbols
// hidden): it is small, loads in about 70 page faults, and the kernels
// compiled by nvcc register with it when the library loads.
//
// In the host emulation of CUDA (runtime/test/quant/cuda_emulation) the
// tables point at the emulation's functions, linked into the same library.
#ifndef FSDPRT_CUDA_CUDA_LIBRARIES_H
#define FSDPRT_CUDA_CUDA_LIBRARIES_H

#include "../src/common.h"

#include <cublas_v2.h>

#include <type_traits>
#ifdef FSDPRT_WITH_NCCL
#include <nccl.h>
#endif

// Every cuBLAS function the runtime calls, by its API name (cublas_v2.h
// maps cublasCreate to the exported cublasCreate_v2; the table's member
// and the symbol looked up follow the same macro). X(name) has the type of
// its declaration; XT(name, type) is a function cublas_api.h overloads in
// C++, with the type of the exported one (checked against the header).
#define FSDPRT_CUBLAS_FUNCTIONS(X, XT)                                         \
  X(cublasCreate)                                                              \
  X(cublasDestroy)                                                             \
  X(cublasSetStream)                                                           \
  X(cublasGetStatusString)                                                     \
  XT(cublasGemmStridedBatchedEx, CublasGemmStridedBatchedExFn)
// The emulation needs no workspace and has no cublasSetWorkspace.
#ifdef FSDPRT_CUDA_EMULATION
#define FSDPRT_CUBLAS_DEVICE_FUNCTIONS(X)
#else
#define FSDPRT_CUBLAS_DEVICE_FUNCTIONS(X) X(cublasSetWorkspace)
#endif

// Every NCCL function the runtime calls.
#define FSDPRT_NCCL_FUNCTIONS(X)                                               \
  X(ncclGetErrorString)                                                        \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRank)                                                          \
  X(ncclCommSplit)                                                             \
  X(ncclCommDestroy)                                                           \
  X(ncclCommAbort)                                                             \
  X(ncclCommGetAsyncError)                                                     \
  X(ncclGroupStart)                                                            \
  X(ncclGroupEnd)                                                              \
  X(ncclAllGather)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclAllReduce)

#define FSDPRT_LIBRARY_ENTRY(name) decltype(&::name) name = nullptr;
// The cast picks the overload of that type; it fails to compile when the
// header declares none.
#define FSDPRT_LIBRARY_TYPED_ENTRY(name, type)                                 \
  static_assert(                                                               \
      std::is_same<decltype(static_cast<type>(&::name)), type>::value, #name); \
  type name = nullptr;

namespace fsdprt {
namespace gpu {

using CublasGemmStridedBatchedExFn = cublasStatus_t (*)(
    cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
    const void *, const void *, cudaDataType, int, long long, const void *,
    cudaDataType, int, long long, const void *, void *, cudaDataType, int,
    long long, int, cublasComputeType_t, cublasGemmAlgo_t);

struct CublasLibrary {
  FSDPRT_CUBLAS_FUNCTIONS(FSDPRT_LIBRARY_ENTRY, FSDPRT_LIBRARY_TYPED_ENTRY)
  FSDPRT_CUBLAS_DEVICE_FUNCTIONS(FSDPRT_LIBRARY_ENTRY)
};

// cuBLAS's table, opening the library on the first call (once per process;
// thread-safe). Not OK when it cannot be opened: the status says why.
Status load_cublas(const CublasLibrary **table);
// The table after a load_cublas that succeeded (a cuBLAS handle exists).
const CublasLibrary &cublas_library();

#ifdef FSDPRT_WITH_NCCL
struct NcclLibrary {
  FSDPRT_NCCL_FUNCTIONS(FSDPRT_LIBRARY_ENTRY)
};
Status load_nccl(const NcclLibrary **table);
// The table after a load_nccl that succeeded (an NCCL communicator exists).
const NcclLibrary &nccl_library();
#endif

} // namespace gpu
} // namespace fsdprt

#undef FSDPRT_LIBRARY_ENTRY
#undef FSDPRT_LIBRARY_TYPED_ENTRY

#endif // FSDPRT_CUDA_CUDA_LIBRARIES_H
