//===- GpuCheckToolkit.cpp - the CUDA toolkit the kernels need ------------===//
//
// gpu-module-to-binary links libdevice from the toolkit and runs its ptxas
// and fatbinary. Without libdevice the kernels' `__nv_*` calls stay
// unresolved (ptxas rejects them); without the tools the serializer fails
// with a message about a subprocess. This pass checks the files first and
// names what is missing and the option that sets the path.
//
//===----------------------------------------------------------------------===//

#include "fsdp/GPU/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPGPUCHECKTOOLKIT
#include "fsdp/GPU/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

std::string mlir::fsdp::defaultCudaPath() {
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    return home;
  return "/usr/local/cuda";
}

namespace {

struct FSDPGpuCheckToolkitPass
    : public mlir::fsdp::impl::FSDPGpuCheckToolkitBase<
          FSDPGpuCheckToolkitPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *ctx) override {
    if (format != "fatbin" && format != "bin" && format != "isa")
      return emitError(UnknownLoc::get(ctx))
             << "option format must be fatbin, bin or isa, got '" << format
             << "'";
    return success();
  }

  void runOnOperation() override {
    auto modules = getOperation().getOps<gpu::GPUModuleOp>();
    if (modules.empty())
      return;
    std::string root = cudaPath.empty() ? defaultCudaPath() : cudaPath;
    struct Need {
      const char *path;
      bool executable;
      const char *what;
    };
    SmallVector<Need> needs = {{"nvvm/libdevice/libdevice.10.bc", false,
                                "libdevice (the kernels' math functions)"}};
    if (format != "isa")
      needs.push_back({"bin/ptxas", true, "ptxas (to assemble the kernels)"});
    if (format == "fatbin")
      needs.push_back(
          {"bin/fatbinary", true, "fatbinary (to package the kernels)"});
    for (const Need &need : needs) {
      SmallString<256> path(root);
      llvm::sys::path::append(path, need.path);
      bool ok = need.executable ? llvm::sys::fs::can_execute(path)
                                : llvm::sys::fs::exists(path);
      if (ok)
        continue;
      (*modules.begin())->emitError()
          << "compute=gpu needs the CUDA toolkit's " << need.what
          << ", but there is no " << (need.executable ? "executable " : "")
          << path << "; set cuda-path=<toolkit root> or CUDA_HOME";
      return signalPassFailure();
    }
  }
};

} // namespace
