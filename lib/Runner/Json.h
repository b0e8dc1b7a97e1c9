//===- Json.h - the runner's JSON values, parser and writer ------*- C++
//-*-===//
//
// The manifest, the checkpoint metadata and the --json report are JSON. The
// runner links no LLVM, so this is its own small implementation, shaped like
// the subset of llvm::json it replaced: objects keep their keys sorted (so the
// text is the same as before), integers stay integers, numbers print with 17
// significant digits. The parser takes untrusted text: it checks UTF-8,
// limits nesting, and reports the line and column of what it rejects.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_JSON_H
#define FSDP_RUNNER_JSON_H

#include "fsdp/Runner/Support.h"

#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace fsdp::run::json {

class Value;
class Object;
using Array = std::vector<Value>;

class Value {
public:
  enum class Kind { Null, Boolean, Integer, Number, String, Array, Object };

  Value(std::nullptr_t = nullptr) {}
  Value(bool b) : kind(Kind::Boolean), boolean(b) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                             int> = 0>
  Value(T i) : kind(Kind::Integer), integer(int64_t(i)) {}
  Value(double d) : kind(Kind::Number), number(d) {}
  Value(const char *s) : kind(Kind::String), string(s) {}
  Value(std::string s) : kind(Kind::String), string(std::move(s)) {}
  Value(std::string_view s) : kind(Kind::String), string(s) {}
  Value(Array a);
  Value(Object o);
  Value(const Value &other);
  Value(Value &&other) noexcept;
  Value &operator=(const Value &other);
  Value &operator=(Value &&other) noexcept;
  ~Value();

  Kind getKind() const { return kind; }
  std::optional<std::nullptr_t> getAsNull() const {
    return kind == Kind::Null ? std::optional<std::nullptr_t>(nullptr)
                              : std::nullopt;
  }
  std::optional<bool> getAsBoolean() const {
    return kind == Kind::Boolean ? std::optional<bool>(boolean) : std::nullopt;
  }
  /// An integer, or a number that is one exactly.
  std::optional<int64_t> getAsInteger() const;
  std::optional<double> getAsNumber() const;
  std::optional<std::string_view> getAsString() const {
    return kind == Kind::String ? std::optional<std::string_view>(string)
                                : std::nullopt;
  }
  const Array *getAsArray() const { return array.get(); }
  Array *getAsArray() { return array.get(); }
  const Object *getAsObject() const { return object.get(); }
  Object *getAsObject() { return object.get(); }

private:
  Kind kind = Kind::Null;
  bool boolean = false;
  int64_t integer = 0;
  double number = 0;
  std::string string;
  std::unique_ptr<Array> array;
  std::unique_ptr<Object> object;
};

/// One member of an object literal: {"key", value}.
struct KV {
  std::string key;
  Value value;
};

class Object {
public:
  using Map = std::map<std::string, Value, std::less<>>;
  Object() = default;
  Object(std::initializer_list<KV> members) {
    for (const KV &kv : members)
      map[kv.key] = kv.value;
  }
  Value &operator[](const std::string &key) { return map[key]; }
  const Value *get(std::string_view key) const {
    auto it = map.find(key);
    return it == map.end() ? nullptr : &it->second;
  }
  Value *get(std::string_view key) {
    auto it = map.find(key);
    return it == map.end() ? nullptr : &it->second;
  }
  std::optional<std::string_view> getString(std::string_view key) const {
    const Value *v = get(key);
    return v ? v->getAsString() : std::nullopt;
  }
  std::optional<int64_t> getInteger(std::string_view key) const {
    const Value *v = get(key);
    return v ? v->getAsInteger() : std::nullopt;
  }
  std::optional<double> getNumber(std::string_view key) const {
    const Value *v = get(key);
    return v ? v->getAsNumber() : std::nullopt;
  }
  std::optional<bool> getBoolean(std::string_view key) const {
    const Value *v = get(key);
    return v ? v->getAsBoolean() : std::nullopt;
  }
  const Object *getObject(std::string_view key) const {
    const Value *v = get(key);
    return v ? v->getAsObject() : nullptr;
  }
  Object *getObject(std::string_view key) {
    Value *v = get(key);
    return v ? v->getAsObject() : nullptr;
  }
  const Array *getArray(std::string_view key) const {
    const Value *v = get(key);
    return v ? v->getAsArray() : nullptr;
  }
  Array *getArray(std::string_view key) {
    Value *v = get(key);
    return v ? v->getAsArray() : nullptr;
  }
  bool empty() const { return map.empty(); }
  size_t size() const { return map.size(); }
  Map::const_iterator begin() const { return map.begin(); }
  Map::const_iterator end() const { return map.end(); }

private:
  Map map;
};

/// Parses `text` (one JSON value, nothing after it but white space).
Expected<Value> parse(std::string_view text);

/// The text of `v`: compact, or with `indent` spaces per level and one
/// member or element per line.
std::string write(const Value &v, int indent = 0);

/// `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
std::string fixUTF8(std::string_view s);

} // namespace fsdp::run::json

#endif
