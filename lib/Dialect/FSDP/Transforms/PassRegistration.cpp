//===- PassRegistration.cpp - fsdp passes and pipelines -------------------===//

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

void mlir::fsdp::registerFSDPPassesAndPipelines() { registerFSDPPasses(); }
