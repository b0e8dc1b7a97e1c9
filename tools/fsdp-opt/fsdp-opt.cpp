//===- fsdp-opt.cpp - mlir-opt with the fsdp dialect and passes -----------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Pipeline/Pipeline.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  // Upstream dialects and passes, so fsdp-opt reads and lowers whatever a
  // training step is written in, exactly as mlir-opt would.
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  registry.insert<mlir::fsdp::FSDPDialect>();
  mlir::fsdp::registerFSDPExtensions(registry);
  mlir::fsdp::registerFSDPPassesAndPipelines();
  // The fsdp passes and pipelines head the help, above the upstream ones.
  std::string overview =
      "fsdp-opt: FSDP sharding and collective insertion\n\n" +
      mlir::fsdp::describeFSDPPassesAndPipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, overview, registry));
}
