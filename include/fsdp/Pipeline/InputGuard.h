//===- InputGuard.h - reject inputs that crash the upstream parser -*- C++ -*-//
//
// MLIR 22's custom parsers of `linalg.transpose` (`permutation = [...]`),
// `linalg.broadcast` and `linalg.reduce` (`dimensions = [...]`) store the
// result of a failed dense-array parse (a null attribute) and crash: any
// element that is not a 64-bit integer literal (an overflowing value such as
// `99999999999999999999`, a float, an identifier, a missing element) ends
// `mlir-opt` with a segmentation fault after its error message. fsdp-opt and
// fsdp-run scan textual input for these lists before parsing and report the
// first bad one as an error at its location instead. Bytecode input and the
// generic form (`<{permutation = array<i64: ...>}>`) are parsed safely by
// MLIR and are not scanned. Likewise `shard.sharding`'s
// `sharded_dims_offsets` and `halo_sizes`: the literal -9223372036854775808
// (MLIR's marker for a dynamic entry) parses as a dynamic entry without an
// operand, and printing the op then crashes.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PIPELINE_INPUTGUARD_H
#define FSDP_PIPELINE_INPUTGUARD_H

#include "mlir/Support/LLVM.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::fsdp {

/// Scans the main buffer of `sourceMgr` (textual MLIR) for integer lists the
/// upstream parser cannot survive. Returns failure after printing an error
/// (`FILE:LINE:COL: error: ...`) through `sourceMgr` for the first one.
LogicalResult checkParserHazards(llvm::SourceMgr &sourceMgr);

} // namespace mlir::fsdp

#endif // FSDP_PIPELINE_INPUTGUARD_H
