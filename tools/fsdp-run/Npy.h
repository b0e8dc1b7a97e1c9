//===- Npy.h - minimal .npy reading and writing -----------------*- C++ -*-===//

#ifndef FSDP_TOOLS_FSDPRUN_NPY_H
#define FSDP_TOOLS_FSDPRUN_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::npy {

/// A dense little-endian C-order array. `descr` is numpy's type string
/// ("<f4", "<f8", "<u2" for bf16 bit patterns, "<i4", "<i8", "|u1").
struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<char> data;
  int64_t numElements() const;
};

/// Reads `path`; on failure returns false with a message in `error`.
bool read(const std::string &path, Array &out, std::string &error);
/// Writes `array` to `path`; on failure returns false with a message.
bool write(const std::string &path, const Array &array, std::string &error);
/// Bytes per element of a descr, 0 if unsupported.
int64_t elementSize(const std::string &descr);

} // namespace fsdp::npy

#endif
