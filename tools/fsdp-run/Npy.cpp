//===- Npy.cpp - minimal .npy reading and writing -------------------------===//

#include "Npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace fsdp::npy {

int64_t Array::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t elementSize(const std::string &descr) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|'))
    return 0;
  char kind = descr[1];
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'V')
    return 0;
  return std::atoi(descr.c_str() + 2);
}

/// Value of `key` in the header dict, e.g. 'descr': '<f4'.
static std::string headerField(const std::string &header,
                               const std::string &key) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos)
    return "";
  pos = header.find(':', pos);
  if (pos == std::string::npos)
    return "";
  ++pos;
  while (pos < header.size() && header[pos] == ' ')
    ++pos;
  if (pos >= header.size())
    return "";
  char open = header[pos];
  char close = open == '(' ? ')' : open == '\'' ? '\'' : ',';
  size_t end = header.find(close, pos + 1);
  if (end == std::string::npos)
    return "";
  return header.substr(open == '\'' || open == '(' ? pos + 1 : pos,
                       end - pos - (open == '\'' || open == '(' ? 1 : 0));
}

bool read(const std::string &path, Array &out, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = "cannot open " + path;
    return false;
  }
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    error = path + " is not a .npy file";
    return false;
  }
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    uint16_t len16;
    in.read(reinterpret_cast<char *>(&len16), 2);
    headerLen = len16;
  } else {
    in.read(reinterpret_cast<char *>(&headerLen), 4);
  }
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen)) {
    error = path + ": truncated header";
    return false;
  }
  out.descr = headerField(header, "descr");
  if (headerField(header, "fortran_order").find("True") == 0) {
    error = path + ": Fortran-ordered arrays are not supported";
    return false;
  }
  int64_t esize = elementSize(out.descr);
  if (esize == 0) {
    error = path + ": unsupported dtype '" + out.descr + "'";
    return false;
  }
  out.shape.clear();
  std::stringstream dims(headerField(header, "shape"));
  std::string item;
  while (std::getline(dims, item, ','))
    if (item.find_first_not_of(" ") != std::string::npos)
      out.shape.push_back(std::stoll(item));
  out.data.resize(out.numElements() * esize);
  if (!in.read(out.data.data(), out.data.size())) {
    error = path + ": truncated data";
    return false;
  }
  return true;
}

bool write(const std::string &path, const Array &array, std::string &error) {
  std::ostringstream shape;
  shape << "(";
  for (size_t i = 0; i < array.shape.size(); ++i)
    shape << array.shape[i]
          << (array.shape.size() == 1 || i + 1 < array.shape.size() ? "," : "");
  shape << ")";
  std::string header = "{'descr': '" + array.descr +
                       "', 'fortran_order': False, 'shape': " + shape.str() +
                       ", }";
  // Pad so that the data starts on a 64-byte boundary, ending in '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    error = "cannot write " + path;
    return false;
  }
  uint16_t len = header.size();
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char *>(&len), 2);
  out.write(header.data(), header.size());
  out.write(array.data.data(), array.data.size());
  if (!out) {
    error = "error writing " + path;
    return false;
  }
  return true;
}

} // namespace fsdp::npy
