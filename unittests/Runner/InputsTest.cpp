//===- InputsTest.cpp - per-step input files, read once per process -------===//

#include "Inputs.h"
#include "Files.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

using namespace fsdp;

namespace {

/// A directory of `steps` files <g>.npy, each [2] f32 holding {g, -g}.
std::string makeStepFiles(int steps) {
  char pattern[] = "/tmp/fsdp-inputs-XXXXXX";
  std::string dir = mkdtemp(pattern) ? pattern : "";
  EXPECT_FALSE(dir.empty());
  for (int g = 0; g < steps; ++g) {
    npy::Array a;
    a.descr = "<f4";
    a.shape = {2};
    float v[2] = {float(g), -float(g)};
    a.data.assign(reinterpret_cast<char *>(v), reinterpret_cast<char *>(v) + 8);
    std::string error;
    EXPECT_TRUE(npy::write(run::StepInput::stepFile(dir, g), a, error))
        << error;
  }
  return dir;
}

TEST(StepInput, EachFileIsReadOncePerProcess) {
  constexpr int kSteps = 5, kRanks = 4;
  std::string dir = makeStepFiles(kSteps);
  run::StepInput in =
      run::StepInput::perStepFiles("x", dir, {2}, "<f4", kRanks);
  std::vector<std::thread> ranks;
  std::vector<int> wrong(kRanks, 0);
  for (int r = 0; r < kRanks; ++r)
    ranks.emplace_back([&, r] {
      for (int g = 0; g < kSteps; ++g) {
        run::StepValue hold;
        auto data = in.at(g, hold);
        if (!data) {
          (void)data.takeError();
          ++wrong[r];
          continue;
        }
        float v[2];
        std::memcpy(v, *data, sizeof v);
        wrong[r] += v[0] != float(g) || v[1] != -float(g);
      }
    });
  for (std::thread &t : ranks)
    t.join();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(wrong[r], 0) << "rank " << r;
  EXPECT_EQ(in.filesRead(), kSteps);
  run::files::removeAll(dir);
}

TEST(StepInput, AFileThatChangedIsAnErrorForEveryReader) {
  std::string dir = makeStepFiles(1);
  run::StepInput in = run::StepInput::perStepFiles("x", dir, {3}, "<f4", 2);
  for (int r = 0; r < 2; ++r) {
    run::StepValue hold;
    auto data = in.at(0, hold);
    ASSERT_FALSE(!!data);
    EXPECT_NE(toString(data.takeError()).find("input 'x'"), std::string::npos);
  }
  run::files::removeAll(dir);
}

TEST(StepInput, StackedValuesAreIndexedByStep) {
  npy::Array a;
  a.descr = "<i4";
  a.shape = {3, 2};
  int32_t v[6] = {0, 1, 10, 11, 20, 21};
  a.data.assign(reinterpret_cast<char *>(v), reinterpret_cast<char *>(v) + 24);
  run::StepInput in = run::StepInput::stacked("x", a);
  run::StepValue hold;
  auto data = in.at(2, hold);
  ASSERT_TRUE(!!data);
  EXPECT_EQ(reinterpret_cast<const int32_t *>(*data)[1], 21);
}

} // namespace
