//===- Npy.cpp - .npy reading and writing ---------------------------------===//

#include "Npy.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::npy {

namespace {

bool mulOverflows(int64_t a, int64_t b, int64_t &out) {
  return __builtin_mul_overflow(a, b, &out);
}

/// A recursive-descent reader of the Python literal numpy writes as the
/// header: {'descr': <str>, 'fortran_order': <bool>, 'shape': <tuple>}.
class DictParser {
public:
  explicit DictParser(const std::string &text) : s(text) {}

  bool parse(Header &out, std::string &error) {
    bool seenDescr = false, seenOrder = false, seenShape = false;
    if (!eat('{'))
      return fail(error, "the header is not a dict");
    while (!eat('}')) {
      std::string key;
      if (!parseString(key) || !eat(':'))
        return fail(error, "malformed header dict");
      bool ok;
      if (key == "descr" && !seenDescr)
        ok = seenDescr = parseString(out.descr);
      else if (key == "fortran_order" && !seenOrder)
        ok = seenOrder = parseBool(out.fortranOrder);
      else if (key == "shape" && !seenShape)
        ok = seenShape = parseShape(out.shape, error);
      else
        return fail(error,
                    "unexpected or repeated key '" + key + "' in the header");
      if (!ok)
        return fail(error,
                    error.empty() ? "bad value of '" + key + "'" : error);
      if (!eat(',')) {
        if (!eat('}'))
          return fail(error, "malformed header dict");
        break;
      }
    }
    skipSpace();
    if (pos != s.size())
      return fail(error, "unexpected text after the header dict");
    if (!seenDescr || !seenOrder || !seenShape)
      return fail(error, "the header lacks 'descr', 'fortran_order' or "
                         "'shape'");
    return true;
  }

private:
  bool fail(std::string &error, const std::string &message) {
    error = message;
    return false;
  }
  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' ||
                              s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool eat(char c) {
    skipSpace();
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool eatWord(const char *word) {
    skipSpace();
    size_t n = std::strlen(word);
    if (s.compare(pos, n, word) != 0)
      return false;
    pos += n;
    return true;
  }
  bool parseString(std::string &out) {
    skipSpace();
    if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"'))
      return false;
    char quote = s[pos++];
    size_t end = s.find(quote, pos);
    if (end == std::string::npos)
      return false;
    out = s.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool parseBool(bool &out) {
    if (eatWord("True"))
      return out = true, true;
    if (eatWord("False"))
      return out = false, true;
    return false;
  }
  bool parseInt(int64_t &out, std::string &error) {
    skipSpace();
    size_t begin = pos;
    int64_t v = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (mulOverflows(v, 10, v) || __builtin_add_overflow(v, s[pos] - '0', &v))
        return fail(error, "a dimension of the shape is too large");
      ++pos;
    }
    if (pos == begin)
      return fail(error, "the shape holds a value that is not a "
                         "non-negative integer");
    out = v;
    return true;
  }
  bool parseShape(std::vector<int64_t> &out, std::string &error) {
    out.clear();
    if (!eat('('))
      return fail(error, "the shape is not a tuple");
    while (!eat(')')) {
      int64_t d;
      if (!parseInt(d, error))
        return false;
      if (out.size() == kMaxDims)
        return fail(error, "the shape has more than " +
                               std::to_string(kMaxDims) + " dimensions");
      out.push_back(d);
      if (!eat(',')) {
        if (!eat(')'))
          return fail(error, "malformed shape tuple");
        break;
      }
    }
    return true;
  }

  const std::string &s;
  size_t pos = 0;
};

/// numpy's spelling of `descr` on a little-endian machine, "" if the type is
/// not one fsdp-run handles.
std::string normalizeDescr(const std::string &descr) {
  if (descr.size() < 3 || descr.size() > 4)
    return "";
  char order = descr[0], kind = descr[1];
  std::string digits = descr.substr(2);
  if (digits.find_first_not_of("0123456789") != std::string::npos)
    return "";
  int size = std::stoi(digits);
  bool known = (kind == 'f' && (size == 2 || size == 4 || size == 8)) ||
               ((kind == 'i' || kind == 'u') &&
                (size == 1 || size == 2 || size == 4 || size == 8)) ||
               (kind == 'V' && size >= 1 && size <= 8);
  if (!known || (order != '<' && order != '|' && order != '=' &&
                 !(order == '>' && size == 1)))
    return "";
  if (order == '|' && size != 1 && kind != 'V')
    return ""; // "not applicable" byte order on a multi-byte number
  bool noOrder = size == 1 || kind == 'V';
  return std::string(1, noOrder ? '|' : '<') + kind + digits;
}

uint32_t littleEndian(const unsigned char *bytes, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i)
    v = (v << 8) | bytes[i];
  return v;
}

/// Reads the magic string, version and header length.
bool readPreamble(std::ifstream &in, uint64_t fileSize, uint32_t &headerLen,
                  uint64_t &headerStart, std::string &error) {
  unsigned char pre[12] = {};
  if (fileSize < 10 || !in.read(reinterpret_cast<char *>(pre), 8) ||
      std::memcmp(pre, "\x93NUMPY", 6) != 0) {
    error = "not a .npy file";
    return false;
  }
  int major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0) {
    error = "unsupported .npy format version " + std::to_string(major) + "." +
            std::to_string(minor) + " (1.0, 2.0 and 3.0 are supported)";
    return false;
  }
  int lenBytes = major == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char *>(pre + 8), lenBytes)) {
    error = "truncated header";
    return false;
  }
  headerLen = littleEndian(pre + 8, lenBytes);
  headerStart = 8 + lenBytes;
  if (headerLen > kMaxHeaderBytes) {
    error = "header length " + std::to_string(headerLen) +
            " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
            " bytes";
    return false;
  }
  if (headerStart + headerLen > fileSize) {
    error = "truncated header (" + std::to_string(headerLen) +
            " bytes announced, file has " + std::to_string(fileSize) + ")";
    return false;
  }
  return true;
}

/// Element count and data size of the parsed header, checked against the
/// bytes left in the file.
bool checkSizes(Header &h, uint64_t fileSize, std::string &error) {
  h.elementBytes = elementSize(h.descr);
  if (h.elementBytes == 0) {
    error = "unsupported dtype '" + h.descr + "'";
    return false;
  }
  int64_t n = 1, bytes = 0;
  for (int64_t d : h.shape)
    if (mulOverflows(n, d, n)) {
      error = "the shape has too many elements";
      return false;
    }
  if (mulOverflows(n, h.elementBytes, bytes)) {
    error = "the shape has too many elements";
    return false;
  }
  h.numElements = n;
  uint64_t have = fileSize - h.dataOffset;
  if (have != uint64_t(bytes)) {
    error = std::string(have < uint64_t(bytes) ? "truncated data"
                                               : "trailing bytes") +
            ": the header announces " + std::to_string(bytes) +
            " bytes of data, the file holds " + std::to_string(have);
    return false;
  }
  return true;
}

/// Reorders Fortran-ordered (column-major) `data` into C order in place.
void fortranToC(Bytes &data, const std::vector<int64_t> &shape,
                int64_t elementBytes, int64_t numElements) {
  size_t rank = shape.size();
  if (rank < 2 || numElements == 0)
    return;
  std::vector<int64_t> stride(rank, 1), idx(rank, 0);
  for (size_t d = 1; d < rank; ++d)
    stride[d] = stride[d - 1] * shape[d - 1];
  Bytes out(data.size());
  for (int64_t e = 0; e < numElements; ++e) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d)
      src += idx[d] * stride[d];
    std::memcpy(out.data() + e * elementBytes, data.data() + src * elementBytes,
                elementBytes);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  data.swap(out);
}

bool writeAll(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string headerFor(const std::string &descr,
                      const std::vector<int64_t> &dims) {
  std::ostringstream shape;
  shape << "(";
  for (size_t i = 0; i < dims.size(); ++i)
    shape << dims[i] << (dims.size() == 1 || i + 1 < dims.size() ? "," : "");
  shape << ")";
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': " + shape.str() +
                       ", }";
  // Pad so that the data starts on a 64-byte boundary, ending in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  return header;
}

} // namespace

int64_t Array::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string fileHeader(const std::string &descr,
                       const std::vector<int64_t> &shape) {
  std::string header = headerFor(descr, shape);
  uint16_t len = uint16_t(header.size());
  char pre[10] = {'\x93',           'N',           'U', 'M', 'P', 'Y', 1, 0,
                  char(len & 0xff), char(len >> 8)};
  return std::string(pre, sizeof(pre)) + header;
}

int64_t elementSize(const std::string &descr) {
  std::string norm = normalizeDescr(descr);
  return norm.empty() ? 0 : std::stoi(norm.substr(2));
}

bool parseHeaderDict(const std::string &text, Header &out, std::string &error) {
  out = Header();
  if (!DictParser(text).parse(out, error))
    return false;
  std::string norm = normalizeDescr(out.descr);
  if (norm.empty()) {
    error = "unsupported dtype '" + out.descr + "'";
    return false;
  }
  out.descr = norm;
  return true;
}

bool readHeader(const std::string &path, Header &out, std::string &error) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  uint64_t fileSize = uint64_t(in.tellg());
  in.seekg(0);
  uint32_t headerLen = 0;
  uint64_t headerStart = 0;
  auto bad = [&](const std::string &what) {
    error = path + ": " + what;
    return false;
  };
  if (!readPreamble(in, fileSize, headerLen, headerStart, error))
    return bad(error);
  std::string text(headerLen, '\0');
  if (!in.read(text.data(), headerLen))
    return bad("truncated header");
  if (text.empty() || text.back() != '\n')
    return bad("the header does not end in a newline");
  if (!parseHeaderDict(text, out, error))
    return bad(error);
  out.dataOffset = headerStart + headerLen;
  if (!checkSizes(out, fileSize, error))
    return bad(error);
  return true;
}

bool read(const std::string &path, Array &out, std::string &error) {
  Header h;
  if (!readHeader(path, h, error))
    return false;
  std::ifstream in(path, std::ios::binary);
  in.seekg(std::streamoff(h.dataOffset));
  out.descr = h.descr;
  out.shape = h.shape;
  size_t bytes = size_t(h.numElements * h.elementBytes);
  // C-order data is mapped, not copied: the page cache's pages, with
  // nothing allocated or zeroed (readHeader checked the file's size).
  if (!h.fortranOrder && out.data.mapFile(path, h.dataOffset, bytes, error))
    return true;
  out.data.resize(bytes);
  if (!in || !in.read(out.data.data(), std::streamsize(out.data.size()))) {
    error = path + ": truncated data";
    return false;
  }
  if (h.fortranOrder)
    fortranToC(out.data, out.shape, h.elementBytes, h.numElements);
  return true;
}

bool write(const std::string &path, const Array &array, std::string &error) {
  return write(path, array.descr, array.shape, array.data.data(),
               array.data.size(), error);
}

bool write(const std::string &path, const std::string &descr,
           const std::vector<int64_t> &shape, const char *data, size_t bytes,
           std::string &error) {
  static std::atomic<unsigned> counter{0};
  std::string header = fileHeader(descr, shape);
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
          std::to_string(counter++);
    fd = ::open(tmp.c_str(),
                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  bool ok =
      writeAll(fd, header.data(), header.size()) && writeAll(fd, data, bytes);
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    error = "error writing " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace fsdp::npy
