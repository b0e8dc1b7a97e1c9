//===- fsdp-opt.cpp - mlir-opt with the fsdp dialect and passes -----------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Pipeline/InputGuard.h"
#include "fsdp/Pipeline/Pipeline.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // Upstream dialects and passes, so fsdp-opt reads and lowers whatever a
  // training step is written in, exactly as mlir-opt would.
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary (compute=gpu) translates the kernels to LLVM IR, as
  // mlir-opt registers it.
  mlir::registerAllGPUToLLVMIRTranslations(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::fsdp::FSDPDialect>();
  mlir::fsdp::registerFSDPExtensions(registry);
  mlir::fsdp::registerFSDPPassesAndPipelines();
  // The fsdp passes and pipelines head the help, above the upstream ones.
  std::string overview =
      "fsdp-opt: FSDP sharding and collective insertion\n\n" +
      mlir::fsdp::describeFSDPPassesAndPipelines();
  auto [inputFilename, outputFilename] =
      mlir::registerAndParseCLIOptions(argc, argv, overview, registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // Listings read no input: upstream prints them.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
  llvm::InitLLVM init(argc, argv);

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      mlir::openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  // Inputs that crash upstream parsers get an error instead (InputGuard.h).
  {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer(file->getMemBufferRef(),
                                         /*RequiresNullTerminator=*/false),
        llvm::SMLoc());
    if (mlir::failed(mlir::fsdp::checkParserHazards(sourceMgr)))
      return EXIT_FAILURE;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return EXIT_FAILURE;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(file), registry, config)))
    return EXIT_FAILURE;
  output->keep();
  return EXIT_SUCCESS;
}
