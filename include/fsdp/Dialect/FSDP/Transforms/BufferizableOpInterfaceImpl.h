//===- BufferizableOpInterfaceImpl.h - bufferizing collectives --*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
namespace fsdp {
/// Lets one-shot bufferization turn tensor collectives into fsdp.buffer.*
/// ops writing a fresh contiguous buffer.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace fsdp
} // namespace mlir

#endif
