// main() of the runtime's tests that need a GPU (ctest label gpu). Every
// test skips itself without a device; then the program says why once and
// exits 77, which ctest reports as skipped (SKIP_RETURN_CODE) rather than
// passed.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (rc == 0 && (err != cudaSuccess || devices == 0)) {
    std::printf("no CUDA device visible (%s): the GPU tests were skipped\n",
                err != cudaSuccess ? cudaGetErrorString(err)
                                   : "cudaGetDeviceCount found 0 devices");
    return 77;
  }
  return rc;
}
