//===- Files.cpp - the file system calls of the runner --------------------===//

#include "Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace fsdp::run::files {

bool exists(const std::string &path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool isDirectory(const std::string &path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

std::error_code createDirectories(const std::string &path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  return ec;
}

void removeAll(const std::string &path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::error_code rename(const std::string &from, const std::string &to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  return ec;
}

std::vector<std::string> list(const std::string &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    names.push_back(it->path().filename().string());
  return names;
}

std::string identity(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "";
  return path + "|" + std::to_string(st.st_dev) + ":" +
         std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

std::string absolute(const std::string &path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return ec ? path : p.string();
}

Expected<Bytes> read(const std::string &path) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec)
    return makeError("cannot read " + path + ": " + ec.message());
  Bytes bytes;
  std::string error;
  if (size && !bytes.mapFile(path, 0, size_t(size), error))
    return makeError("cannot read " + path + ": " + error);
  return std::move(bytes);
}

bool write(const std::string &path, const char *data, size_t size,
           std::string &error, bool atomic) {
  std::string target = atomic ? path + ".tmp" + std::to_string(getpid()) : path;
  FILE *f = std::fopen(target.c_str(), "wb");
  if (!f) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(data, 1, size, f) == size;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    error = "cannot write " + path;
    std::remove(target.c_str());
    return false;
  }
  if (atomic) {
    if (std::error_code ec = rename(target, path)) {
      error = "cannot write " + path + ": " + ec.message();
      std::remove(target.c_str());
      return false;
    }
  }
  return true;
}

} // namespace fsdp::run::files
