// A minimal stand-in for GoogleTest, enough to build the project's GPU test
// files (runtime/test/quant/quant_gpu_test.cpp, runtime/test/test_nccl.cpp) on
// a machine that has only the CUDA toolkit: TEST, EXPECT_/ASSERT_ comparisons
// with streamed messages, ADD_FAILURE, GTEST_SKIP, InitGoogleTest and
// RUN_ALL_TESTS. Used by bench/gpu/check.sh only.
#ifndef FSDP_MINI_GTEST_H
#define FSDP_MINI_GTEST_H

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace testing {

struct TestInfo {
  const char *suite, *name;
  void (*body)();
};

inline std::vector<TestInfo> &registry() {
  static std::vector<TestInfo> tests;
  return tests;
}

struct CurrentTest {
  int failures = 0;
  bool skipped = false;
};

inline CurrentTest &current() {
  static CurrentTest state;
  return state;
}

struct Registrar {
  Registrar(const char *suite, const char *name, void (*body)()) {
    registry().push_back({suite, name, body});
  }
};

class Message {
public:
  template <typename T> Message &operator<<(const T &v) {
    os_ << v;
    return *this;
  }
  Message &operator<<(std::ostream &(*manip)(std::ostream &)) {
    os_ << manip;
    return *this;
  }
  std::string str() const { return os_.str(); }

private:
  std::ostringstream os_;
};

template <typename T, typename = void> struct Printable : std::false_type {};
template <typename T>
struct Printable<T, std::void_t<decltype(std::declval<std::ostream &>()
                                         << std::declval<const T &>())>>
    : std::true_type {};

template <typename T> std::string show(const T &v) {
  if constexpr (Printable<T>::value) {
    std::ostringstream os;
    os << v;
    return os.str();
  } else {
    return "(value)";
  }
}

// Records a failure when assigned the streamed message.
struct AssertHelper {
  const char *file;
  int line;
  std::string what;
  void operator=(const Message &m) const {
    ++current().failures;
    std::printf("%s:%d: Failure\n%s%s%s\n", file, line, what.c_str(),
                what.empty() ? "" : "\n", m.str().c_str());
  }
};

struct SkipHelper {
  void operator=(const Message &m) const {
    current().skipped = true;
    std::printf("  skipped: %s\n", m.str().c_str());
  }
};

template <typename A, typename B>
std::string compareText(const char *op, const char *ea, const char *eb,
                        const A &a, const B &b) {
  return std::string("Expected: (") + ea + ") " + op + " (" + eb +
         "), actual: " + show(a) + " vs " + show(b);
}

inline void InitGoogleTest(int *, char **) {}

inline int RunAllTests() {
  int failed = 0, skipped = 0;
  for (const TestInfo &t : registry()) {
    current() = CurrentTest{};
    std::printf("[ RUN      ] %s.%s\n", t.suite, t.name);
    std::fflush(stdout);
    t.body();
    if (current().failures) {
      ++failed;
      std::printf("[  FAILED  ] %s.%s\n", t.suite, t.name);
    } else if (current().skipped) {
      ++skipped;
      std::printf("[  SKIPPED ] %s.%s\n", t.suite, t.name);
    } else {
      std::printf("[       OK ] %s.%s\n", t.suite, t.name);
    }
    std::fflush(stdout);
  }
  std::printf("[==========] %zu tests: %zu passed, %d skipped, %d failed\n",
              registry().size(), registry().size() - failed - skipped, skipped,
              failed);
  return failed ? 1 : 0;
}

} // namespace testing

#define RUN_ALL_TESTS() ::testing::RunAllTests()

#define TEST(suite, name)                                                      \
  static void suite##_##name##_body();                                         \
  static ::testing::Registrar suite##_##name##_registrar(                      \
      #suite, #name, &suite##_##name##_body);                                  \
  static void suite##_##name##_body()

#define FSDP_MINI_CHECK(cond, text, onfail)                                    \
  if (cond)                                                                    \
    ;                                                                          \
  else                                                                         \
    onfail ::testing::AssertHelper{__FILE__, __LINE__, text} =                 \
        ::testing::Message()

#define FSDP_MINI_CMP(op, a, b, onfail)                                        \
  if (auto &&fsdp_a_ = (a); true)                                              \
    if (auto &&fsdp_b_ = (b); fsdp_a_ op fsdp_b_)                              \
      ;                                                                        \
    else                                                                       \
      onfail ::testing::AssertHelper{                                          \
          __FILE__, __LINE__,                                                  \
          ::testing::compareText(#op, #a, #b, fsdp_a_, fsdp_b_)} =             \
          ::testing::Message()

#define EXPECT_EQ(a, b) FSDP_MINI_CMP(==, a, b, )
#define EXPECT_NE(a, b) FSDP_MINI_CMP(!=, a, b, )
#define EXPECT_LE(a, b) FSDP_MINI_CMP(<=, a, b, )
#define EXPECT_LT(a, b) FSDP_MINI_CMP(<, a, b, )
#define EXPECT_GE(a, b) FSDP_MINI_CMP(>=, a, b, )
#define EXPECT_GT(a, b) FSDP_MINI_CMP(>, a, b, )
#define ASSERT_EQ(a, b) FSDP_MINI_CMP(==, a, b, return )
#define ASSERT_NE(a, b) FSDP_MINI_CMP(!=, a, b, return )
#define ASSERT_LE(a, b) FSDP_MINI_CMP(<=, a, b, return )
#define ASSERT_LT(a, b) FSDP_MINI_CMP(<, a, b, return )
#define ASSERT_GE(a, b) FSDP_MINI_CMP(>=, a, b, return )
#define ASSERT_GT(a, b) FSDP_MINI_CMP(>, a, b, return )
#define EXPECT_TRUE(c) FSDP_MINI_CHECK(c, "Expected true: " #c, )
#define EXPECT_FALSE(c) FSDP_MINI_CHECK(!(c), "Expected false: " #c, )
#define ASSERT_TRUE(c) FSDP_MINI_CHECK(c, "Expected true: " #c, return )
#define ASSERT_FALSE(c) FSDP_MINI_CHECK(!(c), "Expected false: " #c, return )
#define ADD_FAILURE()                                                          \
  ::testing::AssertHelper{__FILE__, __LINE__, ""} = ::testing::Message()
#define GTEST_SKIP() return ::testing::SkipHelper{} = ::testing::Message()

#endif // FSDP_MINI_GTEST_H
