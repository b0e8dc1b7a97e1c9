// TRANSITIONAL-REMOVE-AT-MERGE: Program.cpp still reports a malformed
// signature through fail() until it returns errors as values.
#include "Program.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

namespace fsdp::run {
void fail(const llvm::Twine &message) {
  llvm::errs() << "fsdp-run: error: " << message << "\n";
  llvm::errs().flush();
  std::exit(1);
}
} // namespace fsdp::run
