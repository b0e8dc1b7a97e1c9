//===- JitEntry.cpp - the JIT library's entry point (JitSeam.h) -----------===//

#include "Jit.h"

#include "llvm/Support/Error.h"

namespace fsdp::run {

extern "C" __attribute__((visibility("default"))) int
fsdp_jit_open(JitOpenCall *call) {
  if (call->version != kJitSeamVersion || call->size != sizeof(JitOpenCall)) {
    call->error = std::string(kJitLibrary) +
                  " belongs to another build of the runner (seam version " +
                  std::to_string(call->version) + ", this library's " +
                  std::to_string(kJitSeamVersion) + ")";
    return 1;
  }
  auto opened =
      Jit::open(llvm::StringRef(call->bytes.data(), call->bytes.size()),
                call->name, call->entry, call->cacheDir, call->host);
  if (!opened) {
    call->error = llvm::toString(opened.takeError());
    return 1;
  }
  call->code = std::move(opened->jit);
  call->manifest = std::move(opened->manifest);
  return 0;
}

} // namespace fsdp::run
