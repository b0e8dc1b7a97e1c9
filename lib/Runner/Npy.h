//===- Npy.h - .npy reading and writing -------------------------*- C++ -*-===//
//
// Reads exactly what numpy writes (format versions 1.0, 2.0 and 3.0, the
// header dict's keys in any order, with or without a trailing comma, C or
// Fortran order) and checks the header length, dtype, shape and file size
// before allocating anything. Writes version 1.0 files through a temporary
// file that is renamed into place.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TOOLS_FSDPRUN_NPY_H
#define FSDP_TOOLS_FSDPRUN_NPY_H

#include "fsdp/Runner/Bytes.h"
#include <cstdint>
#include <string>

#include <vector>

namespace fsdp::npy {

/// Longest header accepted (numpy's own default limit is 10,000 bytes).
constexpr uint32_t kMaxHeaderBytes = 1 << 20;
/// Most dimensions accepted (numpy's limit).
constexpr size_t kMaxDims = 64;

/// What a .npy header says. `descr` is normalized to numpy's spelling for a
/// little-endian machine ("<f4", "<u2", "|u1", "|V2", ...).
struct Header {
  std::string descr;
  std::vector<int64_t> shape;
  bool fortranOrder = false;
  int64_t elementBytes = 0;
  int64_t numElements = 0;
  /// Offset of the data in the file.
  uint64_t dataOffset = 0;
};

/// A dense little-endian C-order array. `descr` is numpy's type string
/// ("<f4", "<f8", "<u2" for bf16 bit patterns, "<i4", "<i8", "|u1").
struct Array {
  std::string descr;
  std::vector<int64_t> shape;
  Bytes data;
  int64_t numElements() const;
};

/// Parses the header dict text (between the length field and the data).
/// On failure returns false with a message in `error`.
bool parseHeaderDict(const std::string &text, Header &out, std::string &error);
/// Reads and checks the header of `path`, including that the file holds
/// exactly the data the header announces.
bool readHeader(const std::string &path, Header &out, std::string &error);
/// Reads `path` (Fortran-ordered data is returned in C order).
bool read(const std::string &path, Array &out, std::string &error);
/// Writes `array` to `path` through a temporary file in the same directory
/// that is renamed over `path` (a symlink at `path` is replaced, not
/// followed).
bool write(const std::string &path, const Array &array, std::string &error);
/// The same from `bytes` bytes at `data`, without copying them.
bool write(const std::string &path, const std::string &descr,
           const std::vector<int64_t> &shape, const char *data, size_t bytes,
           std::string &error);
/// The bytes of a version 1.0 file before the data of an array `descr` of
/// `shape` (what `write` writes first; the data starts 64-byte aligned).
std::string fileHeader(const std::string &descr,
                       const std::vector<int64_t> &shape);
/// Bytes per element of a supported descr, 0 if unsupported.
int64_t elementSize(const std::string &descr);

} // namespace fsdp::npy

#endif
