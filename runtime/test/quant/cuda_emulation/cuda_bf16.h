// Emulation build: the kernels take the software bf16 path (see
// cuda_runtime.h in this directory), so nothing from cuda_bf16.h is needed.
#pragma once
