//===- NpyTest.cpp - the .npy reader and writer of fsdp-run ---------------===//

#include "Npy.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace fsdp::npy;

namespace {

std::string tempDir() {
  char tmpl[] = "/tmp/fsdp-npy-XXXXXX";
  return mkdtemp(tmpl);
}

/// A version-`major` file with a literal header dict and raw data.
std::string npyBytes(const std::string &dict, const std::string &data,
                     int major = 1) {
  std::string header = dict;
  size_t pre = major == 1 ? 10 : 12;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(char(major));
  out.push_back(0);
  uint32_t n = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out.push_back(char((n >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string writeFile(const std::string &dir, const std::string &bytes) {
  std::string path = dir + "/a.npy";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(NpyHeader, KeysInAnyOrderWithOrWithoutTrailingComma) {
  for (const char *dict :
       {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}",
        "{'fortran_order': False,'shape':(2,3),'descr':'<f4'}"}) {
    Header h;
    std::string error;
    ASSERT_TRUE(parseHeaderDict(dict, h, error)) << dict << ": " << error;
    EXPECT_EQ(h.descr, "<f4");
    EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_FALSE(h.fortranOrder);
  }
}

TEST(NpyHeader, ScalarsAndOneDimensionalShapes) {
  Header h;
  std::string error;
  ASSERT_TRUE(parseHeaderDict(
      "{'descr': '|u1', 'fortran_order': False, 'shape': (), }", h, error));
  EXPECT_TRUE(h.shape.empty());
  ASSERT_TRUE(parseHeaderDict(
      "{'descr': '<i8', 'fortran_order': True, 'shape': (7,), }", h, error));
  EXPECT_EQ(h.shape, std::vector<int64_t>{7});
  EXPECT_TRUE(h.fortranOrder);
}

TEST(NpyHeader, RejectsWhatNumpyNeverWrites) {
  struct Case {
    const char *dict, *message;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }",
       "not a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('a', 3), }",
       "not a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(12345678901234567890,), }",
       "too large"},
      {"{'descr': '<f-4', 'fortran_order': False, 'shape': (2,), }",
       "unsupported dtype '<f-4'"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
       "unsupported dtype '>f4'"},
      {"{'descr': '<f4', 'shape': (2,), }", "lacks"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
       "'shape': (2,)}",
       "repeated key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
       "bad value of 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
       "unexpected text"},
  };
  for (const Case &c : cases) {
    Header h;
    std::string error;
    EXPECT_FALSE(parseHeaderDict(c.dict, h, error)) << c.dict;
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.dict << " -> " << error;
  }
}

TEST(NpyFile, VersionsOneToThreeRead) {
  std::string dir = tempDir(), data(24, '\0');
  for (int major : {1, 2, 3}) {
    std::string path =
        writeFile(dir, npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (2, 3), }",
                                data, major));
    Array a;
    std::string error;
    EXPECT_TRUE(read(path, a, error)) << major << ": " << error;
  }
}

TEST(NpyFile, SizesCheckedBeforeAllocating) {
  std::string dir = tempDir();
  struct Case {
    std::string bytes;
    const char *message;
  } cases[] = {
      {npyBytes("{'descr': '<f4', 'fortran_order': False, "
                "'shape': (1099511627776,), }",
                std::string(16, '\0')),
       "truncated data"},
      {npyBytes("{'descr': '<f4', 'fortran_order': False, "
                "'shape': (4294967296, 4294967296), }",
                ""),
       "too many elements"},
      {npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                std::string(12, '\0')),
       "trailing bytes"},
      {std::string("\x93NUMPY\x02\x00\xf0\xff\xff\xff", 12) + "{}",
       "exceeds the limit"},
      {std::string("\x93NUMPY\x01\x00\x40\x00", 10) + "{}", "truncated header"},
      {npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                std::string(8, '\0'), 4),
       "format version 4.0"},
      {"not numpy at all", "not a .npy file"},
  };
  for (const Case &c : cases) {
    std::string path = writeFile(dir, c.bytes), error;
    Header h;
    EXPECT_FALSE(readHeader(path, h, error)) << c.message;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

TEST(NpyFile, FortranOrderIsReturnedInCOrder) {
  std::string dir = tempDir();
  // [[0, 1, 2], [3, 4, 5]] stored column by column.
  int32_t f[6] = {0, 3, 1, 4, 2, 5};
  std::string path = writeFile(
      dir, npyBytes("{'descr': '<i4', 'shape': (2, 3), 'fortran_order': True}",
                    std::string(reinterpret_cast<char *>(f), sizeof(f))));
  Array a;
  std::string error;
  ASSERT_TRUE(read(path, a, error)) << error;
  const int32_t *c = reinterpret_cast<const int32_t *>(a.data.data());
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(c[i], i);
}

TEST(NpyFile, WriteReplacesASymlinkInsteadOfFollowingIt) {
  std::string dir = tempDir();
  std::string victim = dir + "/victim", link = dir + "/r.npy";
  std::ofstream(victim) << "keep";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  Array a{"<f8", {2}, fsdp::Bytes(16, 0)};
  std::string error;
  ASSERT_TRUE(write(link, a, error)) << error;
  struct stat st;
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "keep");
  Array back;
  ASSERT_TRUE(read(link, back, error)) << error;
  EXPECT_EQ(back.shape, a.shape);
  EXPECT_EQ(back.descr, "<f8");
}

} // namespace
