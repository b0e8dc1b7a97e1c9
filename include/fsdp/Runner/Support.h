//===- Support.h - errors, views and strings of the runner -------*- C++
//-*-===//
//
// The runner links no LLVM (docs/RUNTIME.md, "Libraries"): these are the few
// vocabulary types it needs, header-only so that the JIT library, which does
// link LLVM, passes the same ones across the seam (JitSeam.h). An Error holds
// a message or nothing (success); an Expected<T> holds a T or an Error.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_SUPPORT_H
#define FSDP_RUNNER_SUPPORT_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace fsdp::run {

/// A failure with a message, or success. True when it holds a failure.
class [[nodiscard]] Error {
public:
  Error() = default;
  static Error success() { return Error(); }
  explicit operator bool() const { return message_ != nullptr; }
  /// The message ("" on success).
  const std::string &message() const {
    static const std::string none;
    return message_ ? *message_ : none;
  }
  /// What kind of failure (a generic one unless its maker said).
  std::errc code() const { return code_; }

private:
  friend Error makeError(std::errc code, std::string message);
  std::unique_ptr<std::string> message_;
  std::errc code_ = std::errc::invalid_argument;
};

/// An error of kind `code` with `message`.
inline Error makeError(std::errc code, std::string message) {
  Error e;
  e.message_ = std::make_unique<std::string>(std::move(message));
  e.code_ = code;
  return e;
}

/// An error with `message`.
inline Error makeError(std::string message) {
  return makeError(std::errc::invalid_argument, std::move(message));
}

/// The message of `e` ("" on success).
inline std::string toString(Error e) { return e.message(); }

/// A T, or the Error that prevented it. True when it holds a T.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(Error e) : error_(std::move(e)) {}
  Expected(T value) : value_(std::move(value)) {}
  template <typename U, typename = std::enable_if_t<
                            std::is_convertible_v<U &&, T> &&
                            !std::is_same_v<std::decay_t<U>, Error> &&
                            !std::is_same_v<std::decay_t<U>, T>>>
  Expected(U &&value) : value_(T(std::forward<U>(value))) {}

  explicit operator bool() const { return value_.has_value(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  /// The error (success when it holds a value).
  Error takeError() { return std::move(error_); }

private:
  std::optional<T> value_;
  Error error_;
};

/// A view of consecutive elements (what llvm::ArrayRef was here).
template <typename T> class Span {
public:
  Span() = default;
  Span(T *data, size_t size) : data_(data), size_(size) {}
  template <typename V, typename = decltype(std::declval<V &>().data())>
  Span(V &v) : data_(v.data()), size_(v.size()) {}
  T *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T *begin() const { return data_; }
  T *end() const { return data_ + size_; }
  T &operator[](size_t i) const { return data_[i]; }
  T &front() const { return data_[0]; }
  T &back() const { return data_[size_ - 1]; }
  std::vector<std::remove_const_t<T>> vec() const { return {begin(), end()}; }

private:
  T *data_ = nullptr;
  size_t size_ = 0;
};

inline bool startsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
inline bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

/// The text of `e`'s error, when `e` holds one ("" otherwise).
template <typename T> std::string errorText(Expected<T> &e) {
  return e ? std::string() : toString(e.takeError());
}

} // namespace fsdp::run

#endif
