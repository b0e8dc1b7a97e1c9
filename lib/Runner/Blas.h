//===- Blas.h - The BLAS library compute=fast steps call ------------------===//
//
// compute=fast steps call cblas_?gemm (fsdp-linalg-to-blas). The runner
// opens the BLAS itself, once per process and RTLD_LOCAL, instead of linking
// it, and resolves the JIT'd code's BLAS symbols against it:
//
// - Intel's MKL (libmkl_rt) on an Intel CPU where it is installed (the
//   project's setup puts the `mkl` wheel in the venv), one thread per rank,
//   with conditional numerical reproducibility in strict mode on the CPU's
//   own code branch: its results do not depend on the operands' alignment,
//   which the bit-identical arena / malloc and recompute tests rely on.
// - OpenBLAS otherwise. OpenBLAS chooses its kernels from the CPU model
//   when it loads, and a release older than the CPU falls back to its SSE3
//   ("Prescott") kernels, about 3.5x slower on an AVX-512 machine (Debian
//   12's 0.3.21 on Emerald Rapids), or may pick AVX2 kernels on an AVX-512
//   CPU (Haswell's are 27-35% slower than the AVX-512 ones on Zen 5). When
//   that happens and OPENBLAS_CORETYPE is not set, the library is opened
//   again with the kernels of the CPU's widest vector units (SkylakeX with
//   AVX-512, Haswell with AVX2 + FMA).
//
// FSDP_BLAS=openblas or FSDP_BLAS=mkl chooses one; FSDP_MKL_LIBRARY names
// the libmkl_rt to open.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_BLAS_H
#define FSDP_RUNNER_BLAS_H

#include <string>

namespace fsdp::run::blas {

struct Library {
  void *handle = nullptr; // dlopen handle (RTLD_LOCAL)
  std::string path;
  std::string name; // "OpenBLAS" or "MKL"
  /// OpenBLAS: openblas_get_corename() of the loaded library; MKL: the
  /// reproducibility branch its kernels run (e.g. "AVX512_E1").
  std::string core;
  /// The core OpenBLAS chose itself when it was replaced ("" otherwise).
  std::string detectedCore;
};

/// The BLAS of JIT-compiled steps, opened on the first call (thread safe),
/// with one BLAS thread (the ranks are the parallelism). Null when the
/// runner was built without OpenBLAS and no MKL was found, or the library
/// cannot be opened.
const Library *library();

/// OpenBLAS, which step libraries built by fsdp-compile link: opened with
/// the same rules, so that a step library's dependency resolves to it.
const Library *openblas();

/// Whether to use MKL: `choice` is FSDP_BLAS (null when unset), `intel`
/// whether the CPU is Intel's. MKL is the default on Intel CPUs only: it
/// runs slower code on others (on AMD Zen 5 OpenBLAS's AVX-512 kernels
/// outrun it).
bool wantMkl(const char *choice, bool intel);

/// The name of an MKL reproducibility branch (MKL_CBWR_*), "" if unknown.
const char *mklBranchName(int branch);

/// The OpenBLAS core to use instead of `detected` on this CPU, or null when
/// `detected` already uses its widest vector units (or the CPU has no AVX2).
/// The CPU features are arguments so that the rule is testable anywhere.
const char *betterCore(const std::string &detected, bool avx2Fma, bool avx512);

} // namespace fsdp::run::blas

#endif // FSDP_RUNNER_BLAS_H
