// Driver API types of the host emulation (cuda_streams.h). The runtime
// reaches the driver functions through cudaGetDriverEntryPointByVersion
// only, so no function is declared here.
#ifndef FSDPRT_CUDA_EMULATION_CUDA_H
#define FSDPRT_CUDA_EMULATION_CUDA_H

#include <cstdint>

typedef int CUresult;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef uintptr_t CUdeviceptr;

enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
};

#endif
