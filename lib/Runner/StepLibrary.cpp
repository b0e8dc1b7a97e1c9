//===- StepLibrary.cpp - load a step compiled ahead of time ---------------===//

#include "StepLibrary.h"
#include "Blas.h"
#include "Files.h"
#include "HostCpu.h"
#include "Memory.h"
#include "fsdprt.h"

#include <chrono>
#include <cstring>
#include <dlfcn.h>

namespace fsdp::run {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

Error error(const std::string &message) { return makeError(message); }

template <typename T> T readAt(std::string_view bytes, uint64_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

/// The contents of section `name` of the ELF64 little-endian file `bytes`;
/// an empty optional when it has none, an error when the file is not one.
Expected<std::optional<std::string_view>> elfSection(std::string_view bytes,
                                                     std::string_view name,
                                                     const std::string &path) {
  if (bytes.size() < 64 || !isSharedObject(bytes) || bytes[4] != 2 ||
      bytes[5] != 1)
    return error(path + " is not a step library (not an ELF64 file)");
  uint64_t shoff = readAt<uint64_t>(bytes, 0x28);
  uint16_t shentsize = readAt<uint16_t>(bytes, 0x3a);
  uint16_t shnum = readAt<uint16_t>(bytes, 0x3c);
  uint16_t shstrndx = readAt<uint16_t>(bytes, 0x3e);
  auto corrupt = [&] {
    return error(path + " is not a step library (corrupt section headers)");
  };
  if (shentsize < 64 || shstrndx >= shnum || shoff > bytes.size() ||
      uint64_t(shnum) * shentsize > bytes.size() - shoff)
    return corrupt();
  auto header = [&](uint64_t i) { return shoff + i * shentsize; };
  uint64_t strOff = readAt<uint64_t>(bytes, header(shstrndx) + 0x18);
  uint64_t strSize = readAt<uint64_t>(bytes, header(shstrndx) + 0x20);
  if (strOff > bytes.size() || strSize > bytes.size() - strOff)
    return corrupt();
  std::string_view names = bytes.substr(strOff, strSize);
  for (uint64_t i = 0; i < shnum; ++i) {
    uint32_t nameOff = readAt<uint32_t>(bytes, header(i));
    if (nameOff >= names.size())
      continue;
    std::string_view sectionName = names.substr(nameOff);
    sectionName = sectionName.substr(0, sectionName.find('\0'));
    if (sectionName != name)
      continue;
    uint64_t off = readAt<uint64_t>(bytes, header(i) + 0x18);
    uint64_t size = readAt<uint64_t>(bytes, header(i) + 0x20);
    if (off > bytes.size() || size > bytes.size() - off)
      return corrupt();
    return std::optional<std::string_view>(bytes.substr(off, size));
  }
  return std::optional<std::string_view>();
}

} // namespace

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

bool isSharedObject(std::string_view bytes) {
  return startsWith(bytes, "\x7f"
                           "ELF");
}

Expected<StepManifest> readStepManifest(const std::string &path) {
  auto bytes = files::read(path);
  if (!bytes)
    return bytes.takeError();
  auto section = elfSection(std::string_view(bytes->data(), bytes->size()),
                            kManifestSection, path);
  if (!section)
    return section.takeError();
  if (!*section)
    return error(path + " is not a step library (no " +
                 std::string(kManifestSection) +
                 " section; build one with fsdp-compile)");
  std::string_view text = **section;
  return parseManifest(text.substr(0, text.find('\0')), path);
}

Error checkLoadable(const StepManifest &m, const std::string &path) {
  if (m.abiVersion != fsdprt_abi_version())
    return error(path + " was built for runtime ABI version " +
                 std::to_string(m.abiVersion) + "; this runtime has version " +
                 std::to_string(fsdprt_abi_version()) + " (rebuild it with " +
                 "fsdp-compile)");
  std::map<std::string, bool> host = hostCpuFeatures();
  std::string missing;
  for (const std::string &f : m.features) {
    auto it = host.find(f);
    if (it == host.end() || !it->second)
      missing += (missing.empty() ? "" : ", ") + f;
  }
  if (!missing.empty() && host.empty())
    return error(path + " was built for CPU '" + m.cpu +
                 "' with features this runner cannot check on this host's "
                 "architecture (it reads them on x86-64 and AArch64 Linux): " +
                 missing);
  if (!missing.empty())
    return error(path + " was built for CPU '" + m.cpu +
                 "' and uses features this host lacks: " + missing +
                 " (build it with --mcpu=" + portableCpu() +
                 " to run anywhere)");
  return Error::success();
}

SharedLibraryStepCode::~SharedLibraryStepCode() {
  if (handle)
    dlclose(handle);
}

Expected<SharedLibraryStepCode::Opened>
SharedLibraryStepCode::open(const std::string &path) {
  auto t0 = std::chrono::steady_clock::now();
  auto manifest = readStepManifest(path);
  if (!manifest)
    return manifest.takeError();
  if (Error e = checkLoadable(*manifest, path))
    return std::move(e);
  std::unique_ptr<SharedLibraryStepCode> code(new SharedLibraryStepCode);
  code->parseSeconds = secondsSince(t0);
  auto t1 = std::chrono::steady_clock::now();
  // A relative name would be searched for on the library path.
  std::string absolute = files::absolute(path);
  // A compute=fast step library links OpenBLAS: opened first, so that the
  // step's dependency resolves to the runner's copy (Blas.h).
  blas::openblas();
  code->handle = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!code->handle)
    return error("cannot load " + path + ": " + dlerror());
  using SetAllocator = void (*)(void *, void *);
  auto set = reinterpret_cast<SetAllocator>(
      dlsym(code->handle, "fsdp_step_set_allocator"));
  if (!set)
    return error(path + " is not a step library (no fsdp_step_set_allocator)");
  set(reinterpret_cast<void *>(&memory::fsdp_run_jit_malloc),
      reinterpret_cast<void *>(&memory::fsdp_run_jit_free));
  // Resolved now: the rank threads then only read the table.
  for (const json::Value &e :
       *manifest->json.getAsObject()->getArray("entries"))
    if (auto symbol = e.getAsObject()->getString("symbol")) {
      auto fn = reinterpret_cast<void (*)(void **)>(
          dlsym(code->handle, std::string(*symbol).c_str()));
      if (!fn)
        return error(path + ": corrupt manifest: no function " +
                     std::string(*symbol));
      code->wrappers[std::string(*symbol)] = fn;
    }
  code->compileSeconds = secondsSince(t1);
  code->cacheHit = true;
  code->precompiled = true;
  return Opened{std::move(code), std::move(*manifest)};
}

Error SharedLibraryStepCode::invokePacked(std::string_view symbol,
                                          Span<void *> args) {
  auto it = wrappers.find(symbol);
  if (it == wrappers.end())
    return error("the step library has no function " + std::string(symbol));
  it->second(args.data());
  return Error::success();
}

} // namespace fsdp::run
