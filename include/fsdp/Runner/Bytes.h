//===- Bytes.h - a byte buffer that is not zero-filled ------------*- C++
//-*-===//
//
// The runner moves hundreds of megabytes per run (inputs, shards, results).
// Bytes zero-fills what it allocates, and a fresh mapping of
// that size is then faulted in and zeroed twice (by the kernel, then by the
// fill) before the data is copied over it. Bytes allocates without filling
// (`Bytes(n)`; `Bytes(n, 0)` zero-fills where zeros are meant), keeps its
// allocation when resized to a size that fits (buffers reused from step to
// step fault nothing in), maps large buffers on their own with a
// transparent-huge-page hint, and can hold a read-only private mapping of a
// file (an input read without copying it).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_BYTES_H
#define FSDP_RUNNER_BYTES_H

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

namespace fsdp {

class Bytes {
public:
  Bytes() = default;
  /// `n` bytes, not initialized.
  explicit Bytes(size_t n) { resize(n); }
  /// `n` bytes, each `fill`.
  Bytes(size_t n, char fill) { assign(n, fill); }
  Bytes(const char *first, const char *last) { assign(first, last); }
  Bytes(const Bytes &o) { assign(o.begin(), o.end()); }
  Bytes(Bytes &&o) noexcept { swap(o); }
  Bytes &operator=(const Bytes &o) {
    if (this != &o)
      assign(o.begin(), o.end());
    return *this;
  }
  Bytes &operator=(Bytes &&o) noexcept {
    Bytes(std::move(o)).swap(*this);
    return *this;
  }
  ~Bytes() { release(); }

  /// The `bytes` bytes of `path` from `offset` as a read-only private
  /// mapping (prefaulted from the page cache unless `populate` is false:
  /// for data that may never be read); false with `error` set when it
  /// cannot be mapped. Writing to it is an error.
  bool mapFile(const std::string &path, size_t offset, size_t bytes,
               std::string &error, bool populate = true);

  char *data() { return ptr; }
  const char *data() const { return ptr; }
  size_t size() const { return length; }
  bool empty() const { return length == 0; }
  char *begin() { return ptr; }
  char *end() { return ptr + length; }
  const char *begin() const { return ptr; }
  const char *end() const { return ptr + length; }
  char &operator[](size_t i) { return ptr[i]; }
  char operator[](size_t i) const { return ptr[i]; }
  /// Whether it holds a read-only file mapping.
  bool mapped() const { return readOnly; }

  /// `n` bytes; the first min(n, size()) keep their value, the rest are
  /// not initialized. Keeps the allocation when `n` fits in it.
  void resize(size_t n);
  void assign(size_t n, char fill) {
    resizeDiscarding(n);
    if (n)
      std::memset(ptr, fill, n);
  }
  void assign(const char *first, const char *last) {
    size_t n = size_t(last - first);
    resizeDiscarding(n);
    if (n)
      std::memcpy(ptr, first, n);
  }
  /// Appends [first, last) (`pos` must be end()).
  void insert(const char *pos, const char *first, const char *last);
  void clear() { length = 0; }
  void swap(Bytes &o) noexcept {
    std::swap(ptr, o.ptr);
    std::swap(length, o.length);
    std::swap(capacity, o.capacity);
    std::swap(mapping, o.mapping);
    std::swap(readOnly, o.readOnly);
    std::swap(mappingBytes, o.mappingBytes);
  }
  bool operator==(const Bytes &o) const {
    return length == o.length && (!length || !std::memcmp(ptr, o.ptr, length));
  }
  bool operator!=(const Bytes &o) const { return !(*this == o); }

private:
  /// `n` bytes, none of whose values matter.
  void resizeDiscarding(size_t n);
  void release();

  char *ptr = nullptr;
  size_t length = 0, capacity = 0;
  /// A mapping of its own (a large buffer), or of a file (`readOnly`; ptr
  /// points into it).
  void *mapping = nullptr;
  size_t mappingBytes = 0;
  bool readOnly = false;
};

} // namespace fsdp

#endif
