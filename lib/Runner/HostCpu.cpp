//===- HostCpu.cpp - the ISA features of the host CPU ---------------------===//

#include "HostCpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace fsdp::run {

#if defined(__x86_64__) || defined(__i386__)

namespace {

struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf = 0) {
  Regs r;
  __cpuid_count(leaf, subleaf, r.a, r.b, r.c, r.d);
  return r;
}

bool bit(unsigned value, int n) { return (value >> n) & 1; }

} // namespace

std::map<std::string, bool> hostCpuFeatures() {
  std::map<std::string, bool> f;
  Regs r0 = cpuid(0);
  unsigned maxLevel = r0.a;
  if (maxLevel < 1)
    return f;
  Regs r1 = cpuid(1);
  f["cx8"] = bit(r1.d, 8);
  f["cmov"] = bit(r1.d, 15);
  f["mmx"] = bit(r1.d, 23);
  f["fxsr"] = bit(r1.d, 24);
  f["sse"] = bit(r1.d, 25);
  f["sse2"] = bit(r1.d, 26);
  f["sse3"] = bit(r1.c, 0);
  f["pclmul"] = bit(r1.c, 1);
  f["ssse3"] = bit(r1.c, 9);
  f["cx16"] = bit(r1.c, 13);
  f["sse4.1"] = bit(r1.c, 19);
  f["sse4.2"] = bit(r1.c, 20);
  f["crc32"] = f["sse4.2"];
  f["movbe"] = bit(r1.c, 22);
  f["popcnt"] = bit(r1.c, 23);
  f["aes"] = bit(r1.c, 25);
  f["rdrnd"] = bit(r1.c, 30);

  // AVX state saved by the OS (XCR0 bits 1-2), AVX-512's (5-7), AMX's
  // (17-18).
  unsigned xcr0 = 0;
  bool hasXSave = bit(r1.c, 27);
  if (hasXSave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = lo;
  }
  bool avxSave = hasXSave && bit(r1.c, 28) && (xcr0 & 0x6) == 0x6;
  bool avx512Save = avxSave && (xcr0 & 0xe0) == 0xe0;
  const unsigned amxBits = (1u << 17) | (1u << 18);
  bool amxSave = hasXSave && (xcr0 & amxBits) == amxBits;

  f["avx"] = avxSave;
  f["fma"] = bit(r1.c, 12) && avxSave;
  f["xsave"] = bit(r1.c, 26) && avxSave;
  f["f16c"] = bit(r1.c, 29) && avxSave;

  unsigned maxExt = cpuid(0x80000000).a;
  bool ext1 = maxExt >= 0x80000001;
  Regs e1 = ext1 ? cpuid(0x80000001) : Regs();
  f["sahf"] = ext1 && bit(e1.c, 0);
  f["lzcnt"] = ext1 && bit(e1.c, 5);
  f["sse4a"] = ext1 && bit(e1.c, 6);
  f["prfchw"] = ext1 && bit(e1.c, 8);
  f["xop"] = ext1 && bit(e1.c, 11) && avxSave;
  f["lwp"] = ext1 && bit(e1.c, 15);
  f["fma4"] = ext1 && bit(e1.c, 16) && avxSave;
  f["tbm"] = ext1 && bit(e1.c, 21);
  f["mwaitx"] = ext1 && bit(e1.c, 29);
  f["64bit"] = ext1 && bit(e1.d, 29);

  bool ext8 = maxExt >= 0x80000008;
  Regs e8 = ext8 ? cpuid(0x80000008) : Regs();
  f["clzero"] = ext8 && bit(e8.b, 0);
  f["rdpru"] = ext8 && bit(e8.b, 4);
  f["wbnoinvd"] = ext8 && bit(e8.b, 9);

  bool leaf7 = maxLevel >= 7;
  Regs l7 = leaf7 ? cpuid(7, 0) : Regs();
  f["fsgsbase"] = leaf7 && bit(l7.b, 0);
  f["sgx"] = leaf7 && bit(l7.b, 2);
  f["bmi"] = leaf7 && bit(l7.b, 3);
  f["avx2"] = leaf7 && bit(l7.b, 5) && avxSave;
  f["bmi2"] = leaf7 && bit(l7.b, 8);
  f["invpcid"] = leaf7 && bit(l7.b, 10);
  f["rtm"] = leaf7 && bit(l7.b, 11);
  f["avx512f"] = leaf7 && bit(l7.b, 16) && avx512Save;
  f["avx512dq"] = leaf7 && bit(l7.b, 17) && avx512Save;
  f["rdseed"] = leaf7 && bit(l7.b, 18);
  f["adx"] = leaf7 && bit(l7.b, 19);
  f["avx512ifma"] = leaf7 && bit(l7.b, 21) && avx512Save;
  f["clflushopt"] = leaf7 && bit(l7.b, 23);
  f["clwb"] = leaf7 && bit(l7.b, 24);
  f["avx512cd"] = leaf7 && bit(l7.b, 28) && avx512Save;
  f["sha"] = leaf7 && bit(l7.b, 29);
  f["avx512bw"] = leaf7 && bit(l7.b, 30) && avx512Save;
  f["avx512vl"] = leaf7 && bit(l7.b, 31) && avx512Save;

  f["avx512vbmi"] = leaf7 && bit(l7.c, 1) && avx512Save;
  f["pku"] = leaf7 && bit(l7.c, 4);
  f["waitpkg"] = leaf7 && bit(l7.c, 5);
  f["avx512vbmi2"] = leaf7 && bit(l7.c, 6) && avx512Save;
  f["shstk"] = leaf7 && bit(l7.c, 7);
  f["gfni"] = leaf7 && bit(l7.c, 8);
  f["vaes"] = leaf7 && bit(l7.c, 9) && avxSave;
  f["vpclmulqdq"] = leaf7 && bit(l7.c, 10) && avxSave;
  f["avx512vnni"] = leaf7 && bit(l7.c, 11) && avx512Save;
  f["avx512bitalg"] = leaf7 && bit(l7.c, 12) && avx512Save;
  f["avx512vpopcntdq"] = leaf7 && bit(l7.c, 14) && avx512Save;
  f["rdpid"] = leaf7 && bit(l7.c, 22);
  f["kl"] = leaf7 && bit(l7.c, 23);
  f["cldemote"] = leaf7 && bit(l7.c, 25);
  f["movdiri"] = leaf7 && bit(l7.c, 27);
  f["movdir64b"] = leaf7 && bit(l7.c, 28);
  f["enqcmd"] = leaf7 && bit(l7.c, 29);

  f["uintr"] = leaf7 && bit(l7.d, 5);
  f["avx512vp2intersect"] = leaf7 && bit(l7.d, 8) && avx512Save;
  f["serialize"] = leaf7 && bit(l7.d, 14);
  f["tsxldtrk"] = leaf7 && bit(l7.d, 16);
  f["pconfig"] = leaf7 && bit(l7.d, 18);
  f["amx-bf16"] = leaf7 && bit(l7.d, 22) && amxSave;
  f["avx512fp16"] = leaf7 && bit(l7.d, 23) && avx512Save;
  f["amx-tile"] = leaf7 && bit(l7.d, 24) && amxSave;
  f["amx-int8"] = leaf7 && bit(l7.d, 25) && amxSave;

  bool leaf71 = leaf7 && l7.a >= 1;
  Regs s1 = leaf71 ? cpuid(7, 1) : Regs();
  f["sha512"] = leaf71 && bit(s1.a, 0);
  f["sm3"] = leaf71 && bit(s1.a, 1);
  f["sm4"] = leaf71 && bit(s1.a, 2);
  f["raoint"] = leaf71 && bit(s1.a, 3);
  f["avxvnni"] = leaf71 && bit(s1.a, 4) && avxSave;
  f["avx512bf16"] = leaf71 && bit(s1.a, 5) && avx512Save;
  f["cmpccxadd"] = leaf71 && bit(s1.a, 7);
  f["amx-fp16"] = leaf71 && bit(s1.a, 21) && amxSave;
  f["hreset"] = leaf71 && bit(s1.a, 22);
  f["avxifma"] = leaf71 && bit(s1.a, 23) && avxSave;
  f["movrs"] = leaf71 && bit(s1.a, 31);
  f["avxvnniint8"] = leaf71 && bit(s1.d, 4) && avxSave;
  f["avxneconvert"] = leaf71 && bit(s1.d, 5) && avxSave;
  f["amx-complex"] = leaf71 && bit(s1.d, 8) && amxSave;
  f["avxvnniint16"] = leaf71 && bit(s1.d, 10) && avxSave;
  f["prefetchi"] = leaf71 && bit(s1.d, 14);
  f["usermsr"] = leaf71 && bit(s1.d, 15);
  bool avx10 = leaf71 && bit(s1.d, 19);
  bool apx = leaf71 && bit(s1.d, 21);
  for (const char *name :
       {"egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu"})
    f[name] = apx;

  bool leafD = maxLevel >= 0xd;
  Regs d1 = leafD ? cpuid(0xd, 1) : Regs();
  f["xsaveopt"] = leafD && bit(d1.a, 0) && avxSave;
  f["xsavec"] = leafD && bit(d1.a, 1) && avxSave;
  f["xsaves"] = leafD && bit(d1.a, 3) && avxSave;

  bool leaf14 = maxLevel >= 0x14;
  f["ptwrite"] = leaf14 && bit(cpuid(0x14, 0).b, 4);

  bool leaf19 = maxLevel >= 0x19;
  f["widekl"] = leaf7 && leaf19 && bit(cpuid(0x19).b, 2);

  bool leaf1E = maxLevel >= 0x1e;
  Regs t1 = leaf1E ? cpuid(0x1e, 1) : Regs();
  f["amx-fp8"] = leaf1E && bit(t1.a, 4) && amxSave;
  f["amx-tf32"] = leaf1E && bit(t1.a, 6) && amxSave;
  f["amx-avx512"] = leaf1E && bit(t1.a, 7) && amxSave;
  f["amx-movrs"] = leaf1E && bit(t1.a, 8) && amxSave;

  bool leaf24 = maxLevel >= 0x24;
  unsigned avx10Version = leaf24 ? (cpuid(0x24).b & 0xff) : 0;
  f["avx10.1"] = avx10 && avx10Version >= 1;
  f["avx10.2"] = avx10 && avx10Version >= 2;
  return f;
}

#elif defined(__aarch64__) && defined(__linux__)

namespace {

// The kernel's HWCAP bits (arch/arm64/include/uapi/asm/hwcap.h): what
// /proc/cpuinfo's "Features" line lists, which LLVM reads.
constexpr unsigned long kFp = 1ul << 0, kAsimd = 1ul << 1, kAes = 1ul << 3,
                        kPmull = 1ul << 4, kSha1 = 1ul << 5, kSha2 = 1ul << 6,
                        kCrc32 = 1ul << 7, kAtomics = 1ul << 8,
                        kSha3 = 1ul << 17, kSm4 = 1ul << 19, kSve = 1ul << 22;
constexpr unsigned long kSve2 = 1ul << 1, kSveAes = 1ul << 2,
                        kSveSha3 = 1ul << 5, kSveSm4 = 1ul << 6; // HWCAP2

} // namespace

std::map<std::string, bool> hostCpuFeatures() {
  unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  auto has = [](unsigned long caps, unsigned long bits) {
    return (caps & bits) == bits;
  };
  // llvm::sys::getHostCPUFeatures' names for the kernel's, and its rule
  // for the crypto extensions: "aes" needs AES and PMULL, "sha2" SHA1 and
  // SHA2.
  return {{"fp-armv8", has(hw, kFp)},      {"neon", has(hw, kAsimd)},
          {"crc", has(hw, kCrc32)},        {"lse", has(hw, kAtomics)},
          {"sha3", has(hw, kSha3)},        {"sm4", has(hw, kSm4)},
          {"sve", has(hw, kSve)},          {"sve2", has(hw2, kSve2)},
          {"sve-aes", has(hw2, kSveAes)},  {"sve-sha3", has(hw2, kSveSha3)},
          {"sve-sm4", has(hw2, kSveSm4)},  {"aes", has(hw, kAes | kPmull)},
          {"sha2", has(hw, kSha1 | kSha2)}};
}

#else

// Another architecture: no feature is known, so a step library that
// records any is refused (StepLibrary.cpp says this host's features cannot
// be read), and one built without features runs.
std::map<std::string, bool> hostCpuFeatures() { return {}; }

#endif

} // namespace fsdp::run
