//===- Files.h - the file system calls of the runner -------------*- C++
//-*-===//
//
// std::filesystem behind the few calls the runner makes, none of which
// throws: a failure is a return value.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RUNNER_FILES_H
#define FSDP_RUNNER_FILES_H

#include "fsdp/Runner/Bytes.h"
#include "fsdp/Runner/Support.h"

#include <string>
#include <system_error>
#include <vector>

namespace fsdp::run::files {

bool exists(const std::string &path);
bool isDirectory(const std::string &path);
std::error_code createDirectories(const std::string &path);
/// Removes `path` and everything under it (nothing when it does not exist).
void removeAll(const std::string &path);
std::error_code rename(const std::string &from, const std::string &to);
/// The names of the entries of the directory `dir` (empty when unreadable).
std::vector<std::string> list(const std::string &dir);
/// What tells a file from its other versions: its path, device, inode,
/// size and modification time ("" when it cannot be read).
std::string identity(const std::string &path);
/// `path` made absolute against the working directory.
std::string absolute(const std::string &path);
/// The whole file, mapped read-only (Bytes::mapFile).
Expected<Bytes> read(const std::string &path);
/// Writes `size` bytes to `path` (through a temporary file and a rename
/// when `atomic`); false with `error` set on failure.
bool write(const std::string &path, const char *data, size_t size,
           std::string &error, bool atomic = false);

} // namespace fsdp::run::files

#endif
