//===- InputGuard.cpp - reject inputs that crash the upstream parser ------===//

#include "fsdp/Pipeline/InputGuard.h"

#include "llvm/ADT/APInt.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace {

bool isIdStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isIdChar(char c) {
  return isIdStart(c) || (c >= '0' && c <= '9') || c == '$' || c == '.';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHexDigit(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// A minimal MLIR lexer: enough to tell bare identifiers from strings,
/// comments and sigiled names, and to read an integer list.
class Scanner {
public:
  explicit Scanner(StringRef text) : text(text) {}

  size_t pos = 0;
  StringRef text;

  bool atEnd() const { return pos >= text.size(); }
  char peek(size_t ahead = 0) const {
    return pos + ahead < text.size() ? text[pos + ahead] : '\0';
  }

  /// Skips whitespace and `//` comments (MLIR has no block comments).
  void skipTrivia() {
    while (!atEnd()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
          c == '\v') {
        ++pos;
      } else if (c == '/' && peek(1) == '/') {
        while (!atEnd() && peek() != '\n')
          ++pos;
      } else {
        return;
      }
    }
  }

  void skipString() { // at the opening quote
    ++pos;
    while (!atEnd()) {
      char c = text[pos++];
      if (c == '\\' && !atEnd())
        ++pos;
      else if (c == '"' || c == '\n')
        return;
    }
  }

  StringRef lexIdentifier() {
    size_t start = pos;
    while (!atEnd() && isIdChar(peek()))
      ++pos;
    return text.slice(start, pos);
  }

  /// Reads `-? (decimal | 0x hex)` fitting a signed 64-bit integer, as the
  /// dense i64 array parser accepts it. Leaves `pos` at the first character
  /// that does not belong to the literal.
  bool lexInt64() {
    bool negative = false;
    if (peek() == '-') {
      negative = true;
      ++pos;
      skipTrivia();
    }
    if (!isDigit(peek()))
      return false;
    size_t start = pos;
    unsigned radix = 10;
    if (peek() == '0' && peek(1) == 'x' && isHexDigit(peek(2))) {
      radix = 16;
      pos += 2;
      start = pos;
      while (!atEnd() && isHexDigit(peek()))
        ++pos;
    } else {
      while (!atEnd() && isDigit(peek()))
        ++pos;
    }
    // `1.5`, `12abc`: another token glued to the digits.
    if (!atEnd() && (isIdChar(peek()) || peek() == '.'))
      return false;
    llvm::APInt value;
    if (text.slice(start, pos).getAsInteger(radix, value))
      return false;
    if (value.getActiveBits() > 64)
      return false;
    llvm::APInt limit = llvm::APInt::getOneBitSet(64, 63); // 2^63
    value = value.zextOrTrunc(64);
    return negative ? value.ule(limit) : value.ult(limit);
  }

  /// Scans a dynamic index list `[ (int | %ssa) (, ...)* ]` up to its `]`.
  /// Returns the position of an element that is the literal
  /// -9223372036854775808 (MLIR's marker for a dynamic entry, which the
  /// printer then looks up among the SSA operands), or npos.
  size_t findDynamicMarker() {
    if (peek() != '[')
      return StringRef::npos;
    ++pos;
    while (true) {
      skipTrivia();
      if (atEnd() || peek() == ']')
        return StringRef::npos;
      if (peek() == '%') {
        ++pos;
        lexIdentifier();
        continue;
      }
      if (peek() == '-') {
        size_t element = pos;
        ++pos;
        skipTrivia();
        size_t start = pos;
        while (!atEnd() && isIdChar(peek()))
          ++pos;
        StringRef digits = text.slice(start, pos);
        unsigned radix = digits.starts_with("0x") ? 16 : 10;
        if (radix == 16)
          digits = digits.drop_front(2);
        llvm::APInt value;
        if (!digits.getAsInteger(radix, value) && value.getActiveBits() <= 64 &&
            value.zextOrTrunc(64) == llvm::APInt::getOneBitSet(64, 63))
          return element;
        continue;
      }
      ++pos;
    }
  }

  /// Reads `[ int (, int)* ]` or `[ ]`.
  bool lexInt64List() {
    if (peek() != '[')
      return false;
    ++pos;
    skipTrivia();
    if (peek() == ']')
      return true;
    while (true) {
      skipTrivia();
      size_t element = pos;
      if (!lexInt64()) {
        pos = element; // report the element, not where lexing stopped
        return false;
      }
      skipTrivia();
      if (peek() == ']')
        return true;
      if (peek() != ',')
        return false;
      ++pos;
    }
  }
};

} // namespace

namespace {

/// Skips what cannot start a guarded op or keyword (strings, SSA, symbol,
/// attribute, type and block names, numbers, punctuation); false at an
/// identifier.
bool skipNonIdentifier(Scanner &s) {
  char c = s.peek();
  if (c == '"') {
    s.skipString();
    return true;
  }
  if (c == '%' || c == '@' || c == '#' || c == '!' || c == '^') {
    ++s.pos;
    s.lexIdentifier();
    return true;
  }
  if (isDigit(c)) {
    while (!s.atEnd() && (isIdChar(s.peek())))
      ++s.pos;
    return true;
  }
  if (!isIdStart(c)) {
    ++s.pos;
    return true;
  }
  return false;
}

/// shard.sharding's static offsets and halo sizes (`id`, the scanner after
/// it): the marker value parses as a dynamic entry without an operand and
/// the printer crashes.
LogicalResult checkStaticSizes(llvm::SourceMgr &sourceMgr, StringRef text,
                               Scanner &s, StringRef id) {
  s.skipTrivia();
  if (s.peek() != '=')
    return success();
  ++s.pos;
  s.skipTrivia();
  size_t at = s.findDynamicMarker();
  if (at == StringRef::npos)
    return success();
  sourceMgr.PrintMessage(
      llvm::SMLoc::getFromPointer(text.data() + at), llvm::SourceMgr::DK_Error,
      "'shard.sharding' " + id +
          ": -9223372036854775808 is MLIR's marker for a dynamic value, "
          "not a static size (rejected before parsing: MLIR crashes "
          "printing it)");
  return failure();
}

/// The list after `guardedOp`'s keyword `id` (the scanner after it) must be
/// 64-bit integer literals.
LogicalResult checkIntList(llvm::SourceMgr &sourceMgr, StringRef text,
                           Scanner &s, StringRef guardedOp, StringRef id) {
  s.skipTrivia();
  if (s.peek() != '=')
    return success(); // the parser reports a missing `=` itself
  ++s.pos;
  s.skipTrivia();
  size_t listStart = s.pos;
  if (s.lexInt64List()) {
    ++s.pos;
    return success();
  }
  // Point at the offending token (or the list when it does not start).
  size_t at = s.pos < text.size() ? s.pos : listStart;
  sourceMgr.PrintMessage(
      llvm::SMLoc::getFromPointer(text.data() + at), llvm::SourceMgr::DK_Error,
      "'" + guardedOp + "' " + id +
          " must be a list of 64-bit integer literals such as [0, 1] "
          "(rejected before parsing: MLIR's parser of this op crashes on "
          "other values)");
  return failure();
}

} // namespace

LogicalResult mlir::fsdp::checkParserHazards(llvm::SourceMgr &sourceMgr) {
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  StringRef text = buffer->getBuffer();
  // Bytecode: attributes are read without the custom parsers.
  if (text.starts_with("ML\xEFR"))
    return success();
  Scanner s(text);
  StringRef op, keyword; // the last guarded op and the keyword it awaits
  while (true) {
    s.skipTrivia();
    if (s.atEnd())
      return success();
    if (skipNonIdentifier(s))
      continue;
    StringRef id = s.lexIdentifier();
    StringRef awaited = llvm::StringSwitch<StringRef>(id)
                            .Case("linalg.transpose", "permutation")
                            .Case("linalg.broadcast", "dimensions")
                            .Case("linalg.reduce", "dimensions")
                            .Default("");
    if (!awaited.empty() || id == "shard.sharding") {
      op = id;
      keyword = awaited;
      continue;
    }
    if (op == "shard.sharding" &&
        (id == "sharded_dims_offsets" || id == "halo_sizes")) {
      if (failed(checkStaticSizes(sourceMgr, text, s, id)))
        return failure();
      continue;
    }
    if (keyword.empty() || id != keyword)
      continue;
    keyword = "";
    if (failed(checkIntList(sourceMgr, text, s, op, id)))
      return failure();
  }
}
