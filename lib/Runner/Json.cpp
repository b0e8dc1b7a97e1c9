//===- Json.cpp - the runner's JSON values, parser and writer -------------===//

#include "Json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace fsdp::run::json {

Value::Value(Array a)
    : kind(Kind::Array), array(std::make_unique<Array>(std::move(a))) {}
Value::Value(Object o)
    : kind(Kind::Object), object(std::make_unique<Object>(std::move(o))) {}
Value::Value(const Value &other) { *this = other; }
Value::Value(Value &&other) noexcept { *this = std::move(other); }
Value::~Value() = default;

Value &Value::operator=(const Value &other) {
  if (this == &other)
    return *this;
  kind = other.kind;
  boolean = other.boolean;
  integer = other.integer;
  number = other.number;
  string = other.string;
  array = other.array ? std::make_unique<Array>(*other.array) : nullptr;
  object = other.object ? std::make_unique<Object>(*other.object) : nullptr;
  return *this;
}

Value &Value::operator=(Value &&other) noexcept {
  kind = other.kind;
  boolean = other.boolean;
  integer = other.integer;
  number = other.number;
  string = std::move(other.string);
  array = std::move(other.array);
  object = std::move(other.object);
  other.kind = Kind::Null;
  return *this;
}

std::optional<int64_t> Value::getAsInteger() const {
  if (kind == Kind::Integer)
    return integer;
  // A double that is an integer exactly (and in range) reads as one.
  if (kind == Kind::Number && std::nearbyint(number) == number &&
      number >= -9223372036854775808.0 && number < 9223372036854775808.0)
    return int64_t(number);
  return std::nullopt;
}

std::optional<double> Value::getAsNumber() const {
  if (kind == Kind::Number)
    return number;
  if (kind == Kind::Integer)
    return double(integer);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

namespace {

/// The length of the valid UTF-8 sequence at s[i], or 0.
size_t utf8Length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return uint8_t(s[k]); };
  uint8_t c = byte(i);
  if (c < 0x80)
    return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

void appendUTF8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

} // namespace

std::string fixUTF8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8Length(s, i);
    if (n == 0) {
      appendUTF8(out, 0xFFFD);
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Parsing
//===----------------------------------------------------------------------===//

namespace {

/// Deepest nesting of arrays and objects accepted (a hostile file must not
/// exhaust the stack).
constexpr int kMaxDepth = 256;

class Parser {
public:
  explicit Parser(std::string_view text) : text(text) {}

  Expected<Value> run() {
    Value v;
    if (!value(v, 0))
      return failure();
    space();
    if (pos != text.size()) {
      fail("text after the JSON value");
      return failure();
    }
    return std::move(v);
  }

private:
  std::string_view text;
  size_t pos = 0;
  std::string problem;

  Error failure() {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos && i < text.size(); ++i) {
      if (text[i] == '\n')
        ++line, column = 1;
      else
        ++column;
    }
    return makeError("[" + std::to_string(line) + ":" + std::to_string(column) +
                     ", byte=" + std::to_string(pos) + "]: " + problem);
  }
  bool fail(const std::string &why) {
    if (problem.empty())
      problem = why;
    return false;
  }
  void space() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool literal(std::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return fail("invalid JSON value");
    pos += word.size();
    return true;
  }

  bool value(Value &out, int depth) {
    space();
    if (pos >= text.size())
      return fail("unexpected end of input");
    char c = text[pos];
    switch (c) {
    case 'n':
      out = nullptr;
      return literal("null");
    case 't':
      out = true;
      return literal("true");
    case 'f':
      out = false;
      return literal("false");
    case '"': {
      std::string s;
      if (!string(s))
        return false;
      out = std::move(s);
      return true;
    }
    case '[':
      return arrayValue(out, depth);
    case '{':
      return objectValue(out, depth);
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return numberValue(out);
      return fail("invalid JSON value");
    }
  }

  bool arrayValue(Value &out, int depth) {
    if (depth >= kMaxDepth)
      return fail("nesting too deep");
    ++pos; // [
    Array a;
    space();
    if (pos < text.size() && text[pos] == ']') {
      ++pos;
      out = std::move(a);
      return true;
    }
    while (true) {
      a.emplace_back();
      if (!value(a.back(), depth + 1))
        return false;
      space();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == ']') {
        ++pos;
        out = std::move(a);
        return true;
      }
      return fail("expected , or ] after array element");
    }
  }

  bool objectValue(Value &out, int depth) {
    if (depth >= kMaxDepth)
      return fail("nesting too deep");
    ++pos; // {
    Object o;
    space();
    if (pos < text.size() && text[pos] == '}') {
      ++pos;
      out = std::move(o);
      return true;
    }
    while (true) {
      space();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected object key");
      std::string key;
      if (!string(key))
        return false;
      space();
      if (pos >= text.size() || text[pos] != ':')
        return fail("expected : after object key");
      ++pos;
      if (o.get(key))
        return fail("duplicate key '" + key + "'");
      if (!value(o[key], depth + 1))
        return false;
      space();
      if (pos < text.size() && text[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < text.size() && text[pos] == '}') {
        ++pos;
        out = std::move(o);
        return true;
      }
      return fail("expected , or } after object property");
    }
  }

  bool hex4(uint32_t &cp) {
    if (pos + 4 > text.size())
      return fail("invalid \\u escape");
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      char h = text[pos++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f')
        cp |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        cp |= uint32_t(h - 'A' + 10);
      else
        return fail("invalid \\u escape");
    }
    return true;
  }

  bool string(std::string &out) {
    ++pos; // "
    while (true) {
      if (pos >= text.size())
        return fail("unterminated string");
      char c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (uint8_t(c) < 0x20)
        return fail("control character in a string");
      if (c != '\\') {
        size_t n = utf8Length(text, pos);
        if (n == 0)
          return fail("invalid UTF-8 in a string");
        out.append(text.substr(pos, n));
        pos += n;
        continue;
      }
      if (++pos >= text.size())
        return fail("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp;
        if (!hex4(cp))
          return false;
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t low;
          if (text.substr(pos, 2) != "\\u")
            return fail("unpaired surrogate");
          pos += 2;
          if (!hex4(low) || low < 0xDC00 || low > 0xDFFF)
            return fail("unpaired surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail("unpaired surrogate");
        }
        appendUTF8(out, cp);
        break;
      }
      default:
        return fail("invalid escape sequence");
      }
    }
  }

  bool numberValue(Value &out) {
    size_t start = pos;
    bool integral = true;
    if (text[pos] == '-')
      ++pos;
    auto digits = [&] {
      size_t d = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
      return pos > d;
    };
    if (!digits())
      return fail("invalid number");
    if (pos < text.size() && text[pos] == '.') {
      integral = false;
      ++pos;
      if (!digits())
        return fail("invalid number");
    }
    if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
      integral = false;
      ++pos;
      if (pos < text.size() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits())
        return fail("invalid number");
    }
    std::string s(text.substr(start, pos - start));
    if (integral) {
      errno = 0;
      char *end = nullptr;
      long long i = std::strtoll(s.c_str(), &end, 10);
      if (errno == 0 && end == s.c_str() + s.size()) {
        out = int64_t(i);
        return true;
      }
    }
    out = std::strtod(s.c_str(), nullptr);
    return true;
  }
};

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

void quote(std::string &out, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c >= 0x20) {
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  out += '"';
}

void writeValue(std::string &out, const Value &v, int indent, int level) {
  auto newline = [&](int depth) {
    if (indent) {
      out += '\n';
      out.append(size_t(indent * depth), ' ');
    }
  };
  switch (v.getKind()) {
  case Value::Kind::Null:
    out += "null";
    return;
  case Value::Kind::Boolean:
    out += *v.getAsBoolean() ? "true" : "false";
    return;
  case Value::Kind::Integer:
    out += std::to_string(*v.getAsInteger());
    return;
  case Value::Kind::Number: {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.*g",
                  std::numeric_limits<double>::max_digits10, *v.getAsNumber());
    out += buf;
    return;
  }
  case Value::Kind::String:
    quote(out, *v.getAsString());
    return;
  case Value::Kind::Array: {
    const Array &a = *v.getAsArray();
    out += '[';
    for (size_t i = 0; i < a.size(); ++i) {
      if (i)
        out += ',';
      newline(level + 1);
      writeValue(out, a[i], indent, level + 1);
    }
    if (!a.empty())
      newline(level);
    out += ']';
    return;
  }
  case Value::Kind::Object: {
    const Object &o = *v.getAsObject();
    out += '{';
    bool first = true;
    for (const auto &[key, member] : o) {
      if (!first)
        out += ',';
      first = false;
      newline(level + 1);
      quote(out, key);
      out += indent ? ": " : ":";
      writeValue(out, member, indent, level + 1);
    }
    if (!o.empty())
      newline(level);
    out += '}';
    return;
  }
  }
}

} // namespace

Expected<Value> parse(std::string_view text) { return Parser(text).run(); }

std::string write(const Value &v, int indent) {
  std::string out;
  writeValue(out, v, indent, 0);
  return out;
}

} // namespace fsdp::run::json
