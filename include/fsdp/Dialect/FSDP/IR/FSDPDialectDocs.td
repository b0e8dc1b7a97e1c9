//===- FSDPDialectDocs.td - every op of the fsdp dialect ------*- tablegen -*-===//
//
// The dialect's ops live in two files (the collectives and buffers in
// FSDPOps.td, the sparse-expert ops in FSDPExpertOps.td); the reference in
// docs/generated/FSDPDialect.md is generated from both through this file.
//
//===----------------------------------------------------------------------===//

include "fsdp/Dialect/FSDP/IR/FSDPOps.td"
include "fsdp/Dialect/FSDP/IR/FSDPExpertOps.td"
