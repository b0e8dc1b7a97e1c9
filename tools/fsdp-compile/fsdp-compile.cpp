//===- fsdp-compile.cpp - compile a lowered step ahead of time ------------===//
//
// Turns a step lowered by `fsdp-opt --fsdp-pipeline="lower=true ..."` into a
// shared library that fsdp-run, the runner library and the LLVM-free runner
// (python -m fsdp_mlir.aot) load without compiling (lib/Runner/StepLibrary.h,
// docs/AOT.md). The code is the JIT's (kernels at -O2, glue at -O0), for
// the architecture's baseline CPU (x86-64; generic on AArch64) unless
// --mcpu says otherwise.
//
//===----------------------------------------------------------------------===//

#include "HostCpu.h"
#include "Jit.h"
#include "StepCompiler.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace ::fsdp::run;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("fsdp-compile options");

struct Flags {
  cl::opt<std::string> input{cl::Positional, cl::desc("<lowered .mlir>"),
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> output{"o", cl::desc("The step library to write"),
                              cl::value_desc("step.so"), cl::Required,
                              cl::cat(category)};
  cl::opt<std::string> cpu{
      "mcpu",
      cl::desc("Target CPU: an LLVM CPU name, or native for this host "
               "(default: x86-64, generic on AArch64: runs on any machine "
               "of the architecture)"),
      cl::init(portableCpu()), cl::cat(category)};
  cl::opt<std::string> features{
      "mattr", cl::desc("Extra target features, e.g. +avx2,+fma"), cl::init(""),
      cl::cat(category)};
  cl::opt<std::string> runtime{
      "runtime",
      cl::desc("libfsdprt.so to link against (default: this build's)"),
      cl::init(""), cl::cat(category)};
  cl::list<std::string> link{
      "link",
      cl::desc("Another library to link (a path or -lname; repeatable)"),
      cl::cat(category)};
  cl::opt<std::string> linker{
      "linker", cl::desc("Compiler driver that links (default: $CC, else cc)"),
      cl::init(""), cl::cat(category)};
  cl::opt<bool> allowUndefined{
      "allow-undefined",
      cl::desc("Leave symbols no linked library defines to the loader"),
      cl::init(false), cl::cat(category)};
  cl::opt<bool> json{"json", cl::desc("Print the report as one JSON object"),
                     cl::init(false), cl::cat(category)};
};

[[noreturn]] void fail(llvm::Error e) {
  llvm::errs() << "fsdp-compile: " << llvm::toString(std::move(e)) << "\n";
  exit(1);
}

void printReport(const Flags &f, const CompileReport &r) {
  if (!f.json) {
    llvm::outs() << llvm::format(
        "compiled %s for %s: parse %.3f s, compile %.3f s, link %.3f s\n",
        f.output.getValue().c_str(), r.cpu.c_str(), r.parseSeconds,
        r.compileSeconds, r.linkSeconds);
    return;
  }
  llvm::json::Array entries, needed, phases;
  for (const std::string &e : r.entries)
    entries.push_back(e);
  for (const std::string &n : r.needed)
    needed.push_back(n);
  for (const auto &[name, s] : r.phases)
    phases.push_back(llvm::json::Object{{"phase", name}, {"s", s}});
  llvm::outs() << llvm::json::Value(
                      llvm::json::Object{{"output", f.output.getValue()},
                                         {"cpu", r.cpu},
                                         {"entries", std::move(entries)},
                                         {"needed", std::move(needed)},
                                         {"parse_s", r.parseSeconds},
                                         {"compile_s", r.compileSeconds},
                                         {"link_s", r.linkSeconds},
                                         {"phases", std::move(phases)}})
               << "\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Flags f;
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "fsdp-compile: a lowered fsdp step -> a shared library fsdp-run loads "
      "without compiling\n");
  initializeJit();
  auto bytes = llvm::MemoryBuffer::getFile(f.input, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!bytes)
    fail(llvm::createStringError("cannot read " + f.input + ": " +
                                 bytes.getError().message()));
  CompileOptions o;
  o.cpu = f.cpu;
  o.features = f.features;
  o.runtimeLibrary = f.runtime;
  o.libraries.assign(f.link.begin(), f.link.end());
  o.linker = f.linker;
  o.allowUndefined = f.allowUndefined;
  mlir::MLIRContext context(runnerRegistry());
  auto report = compileStepLibrary((*bytes)->getMemBufferRef(), f.input,
                                   f.output, o, context);
  if (!report)
    fail(report.takeError());
  printReport(f, *report);
  return 0;
}
