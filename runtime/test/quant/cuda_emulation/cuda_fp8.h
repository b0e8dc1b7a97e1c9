// Emulation build: the kernels take the software fp8 path (see
// cuda_runtime.h in this directory), so nothing from cuda_fp8.h is needed.
#pragma once
