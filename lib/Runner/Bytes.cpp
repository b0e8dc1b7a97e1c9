//===- Bytes.cpp - a byte buffer that is not zero-filled ------------------===//

#include "fsdp/Runner/Bytes.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <new>
#include <sys/mman.h>
#include <unistd.h>

namespace fsdp {

namespace {

/// Buffers from this size on are mappings of their own, backed by huge
/// pages where the kernel has them: 512 times fewer page faults when they
/// are first written.
constexpr size_t kHugeFrom = size_t(4) << 20;
constexpr size_t kHugePage = size_t(2) << 20;

} // namespace

void Bytes::release() {
  if (mapping)
    ::munmap(mapping, mappingBytes);
  else
    std::free(ptr);
  ptr = nullptr;
  mapping = nullptr;
  readOnly = false;
  length = capacity = mappingBytes = 0;
}

void Bytes::resizeDiscarding(size_t n) {
  if (!readOnly && n <= capacity) {
    length = n;
    return;
  }
  release();
  if (n == 0)
    return;
  if (n >= kHugeFrom) {
    size_t span = (n + kHugePage - 1) / kHugePage * kHugePage;
    void *m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(m, span, MADV_HUGEPAGE);
#endif
    mapping = m;
    mappingBytes = span;
    ptr = static_cast<char *>(m);
    length = n;
    capacity = span;
    return;
  }
  ptr = static_cast<char *>(std::malloc(n));
  if (!ptr)
    throw std::bad_alloc();
  length = capacity = n;
}

void Bytes::resize(size_t n) {
  if (!readOnly && n <= capacity) {
    length = n;
    return;
  }
  Bytes grown;
  grown.resizeDiscarding(n);
  if (length)
    std::memcpy(grown.ptr, ptr, length < n ? length : n);
  swap(grown);
}

void Bytes::insert(const char *pos, const char *first, const char *last) {
  (void)pos; // appends only
  size_t n = size_t(last - first), old = length;
  if (!n)
    return;
  if (readOnly || old + n > capacity) {
    // Geometric growth: per-step scalars are appended step by step.
    size_t want = old + n > 2 * capacity ? old + n : 2 * capacity;
    Bytes grown;
    grown.resizeDiscarding(want);
    if (old)
      std::memcpy(grown.ptr, ptr, old);
    swap(grown);
  }
  std::memcpy(ptr + old, first, n);
  length = old + n;
}

bool Bytes::mapFile(const std::string &path, size_t offset, size_t bytes,
                    std::string &error, bool populate) {
  release();
  if (bytes == 0)
    return true;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path;
    return false;
  }
  long page = ::sysconf(_SC_PAGESIZE);
  size_t start = offset - offset % size_t(page);
  size_t span = bytes + (offset - start);
  void *m =
      ::mmap(nullptr, span, PROT_READ,
             MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, off_t(start));
  ::close(fd);
  if (m == MAP_FAILED) {
    error = "cannot map " + path;
    return false;
  }
  mapping = m;
  mappingBytes = span;
  readOnly = true;
  ptr = static_cast<char *>(m) + (offset - start);
  length = capacity = bytes;
  return true;
}

} // namespace fsdp
