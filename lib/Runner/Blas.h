//===- Blas.h - The BLAS library compute=fast steps call ------------------===//
//
// compute=fast steps call cblas_?gemm (fsdp-linalg-to-blas). The runner
// opens OpenBLAS itself, once per process and RTLD_LOCAL, instead of linking
// it: OpenBLAS chooses its kernels from the CPU model when it loads, and a
// release older than the CPU falls back to its SSE3 ("Prescott") kernels,
// about 3.5x slower on an AVX-512 machine (Debian 12's 0.3.21 on Emerald
// Rapids), or may pick AVX2 kernels on an AVX-512 CPU (Haswell's are
// 27-35% slower than the AVX-512 ones on Zen 5). When that happens and
// OPENBLAS_CORETYPE is not set, the library is opened again with the kernels of
// the CPU's widest vector units (SkylakeX with AVX-512, Haswell with AVX2 +
// FMA).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_BLAS_H
#define FSDP_RUNNER_BLAS_H

#include <string>

namespace fsdp::run::blas {

struct Library {
  void *handle = nullptr; // dlopen handle (RTLD_LOCAL)
  std::string path;
  std::string core; // openblas_get_corename() of the loaded library
  /// The core OpenBLAS chose itself when it was replaced ("" otherwise).
  std::string detectedCore;
};

/// The process's BLAS, opened on the first call (thread safe), with one
/// BLAS thread (the ranks are the parallelism). Null when the runner was
/// built without OpenBLAS or the library cannot be opened.
const Library *library();

/// The OpenBLAS core to use instead of `detected` on this CPU, or null when
/// `detected` already uses its widest vector units (or the CPU has no AVX2).
/// The CPU features are arguments so that the rule is testable anywhere.
const char *betterCore(const std::string &detected, bool avx2Fma, bool avx512);

} // namespace fsdp::run::blas

#endif // FSDP_RUNNER_BLAS_H
