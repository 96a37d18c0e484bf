#include "trident/process/blas.h"

#include <gtest/gtest.h>

namespace trident::process {
namespace {

// The kernel this process runs passes the check of Note [BLAS kernel] with room to
// spare: the bound is a worst case, real rounding stays far inside it.
TEST(BlasCheck, TheLoadedKernelComputesProductsWellInsideTheRoundingBound) {
  const auto check = check_products();
  EXPECT_TRUE(check.ok) << check.worst;
  EXPECT_LT(check.ratio, 0.25) << blas_in_use().describe();
  EXPECT_GT(check.ratio, 0) << "no rounding at all: the products were not compared";
  std::cout << blas_in_use().describe() << ": worst element at " << check.ratio << " of the bound\n";
}

TEST(BlasCheck, InUseNamesTheLibraryAndItsKernel) {
  const auto b = blas_in_use();
  // The CUDA variant links a torch wheel's LibTorch, which carries MKL (docs/gpu.md).
  if (b.library == "MKL (inside LibTorch)") GTEST_SKIP() << "a LibTorch with its own MKL: " << b.describe();
  ASSERT_EQ(b.library.rfind("OpenBLAS ", 0), 0u) << b.describe();  // install-deps installs libopenblas0-pthread
  EXPECT_FALSE(b.kernel.empty());
  EXPECT_NE(b.describe().find(", kernel " + b.kernel), std::string::npos) << b.describe();
}

}  // namespace
}  // namespace trident::process
