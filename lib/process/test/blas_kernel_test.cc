#include "trident/process/blas_kernel.h"

#include <gtest/gtest.h>

namespace trident::process {
namespace {

CpuFeatures avx2_cpu() {
  CpuFeatures c;
  c.avx = c.avx2 = c.fma = true;
  return c;
}

CpuFeatures avx512_cpu(bool bf16) {
  CpuFeatures c = avx2_cpu();
  c.avx512f = c.avx512bw = c.avx512vl = c.avx512dq = true;
  c.avx512bf16 = bf16;
  return c;
}

TEST(BlasKernel, LevelsFollowTheWholeSetOfFeatures) {
  EXPECT_EQ(best_level(CpuFeatures{}), SimdLevel::kSse);
  EXPECT_EQ(best_level(avx2_cpu()), SimdLevel::kAvx2);
  EXPECT_EQ(best_level(avx512_cpu(false)), SimdLevel::kAvx512);
  EXPECT_EQ(best_level(avx512_cpu(true)), SimdLevel::kAvx512Bf16);
  CpuFeatures partial = avx512_cpu(true);
  partial.avx512vl = false;  // SkylakeX's kernels need F, BW, VL and DQ
  EXPECT_EQ(best_level(partial), SimdLevel::kAvx2);
  CpuFeatures no_fma = avx2_cpu();
  no_fma.fma = false;
  EXPECT_EQ(best_level(no_fma), SimdLevel::kAvx);
}

TEST(BlasKernel, KnownFamiliesInAnyCaseUnknownOnesAreNot) {
  EXPECT_EQ(kernel_level("Prescott"), SimdLevel::kSse);
  EXPECT_EQ(kernel_level("PRESCOTT"), SimdLevel::kSse);
  EXPECT_EQ(kernel_level("Haswell"), SimdLevel::kAvx2);
  EXPECT_EQ(kernel_level("skylakex"), SimdLevel::kAvx512);
  EXPECT_EQ(kernel_level("Cooperlake"), SimdLevel::kAvx512Bf16);
  EXPECT_FALSE(kernel_level("NeoverseN1"));
  EXPECT_FALSE(kernel_level(""));
}

TEST(BlasKernel, AFallbackIsReplacedByTheBestFamilyTheCpuSupports) {
  // The machine of issue 32: OpenBLAS 0.3.21 did not know the CPU and ran Prescott.
  EXPECT_EQ(better_kernel("Prescott", avx512_cpu(true)), "Cooperlake");
  EXPECT_EQ(better_kernel("Prescott", avx512_cpu(false)), "SkylakeX");
  EXPECT_EQ(better_kernel("Nehalem", avx2_cpu()), "Haswell");
  EXPECT_EQ(better_kernel("Haswell", avx512_cpu(false)), "SkylakeX");
  EXPECT_EQ(better_kernel("Sandybridge", avx2_cpu()), "Haswell");
}

TEST(BlasKernel, AKernelAsGoodForFloat32OrAnUnknownOneIsKept) {
  EXPECT_EQ(better_kernel("SkylakeX", avx512_cpu(true)), "");  // BF16 adds nothing to float32 products
  EXPECT_EQ(better_kernel("Cooperlake", avx512_cpu(true)), "");
  EXPECT_EQ(better_kernel("Haswell", avx2_cpu()), "");
  EXPECT_EQ(better_kernel("Zen", avx2_cpu()), "");
  EXPECT_EQ(better_kernel("Prescott", CpuFeatures{}), "");  // an SSE-only CPU: nothing better to run
  EXPECT_EQ(better_kernel("NeoverseN1", avx512_cpu(true)), "");
  EXPECT_EQ(better_kernel("SkylakeX", avx2_cpu()), "");  // never a kernel the CPU cannot run
}

// The choice travels to the re-executed process as text: every verdict comes
// back as written, a reason may hold spaces, colons and tabs, and text the
// encoder did not write is refused.
TEST(BlasKernel, AChoiceDecodesAsItWasEncoded) {
  using Verdict = BlasChoice::Verdict;
  for (const auto& c : {BlasChoice{Verdict::kKept, "SkylakeX", "", ""}, BlasChoice{Verdict::kUser, "Haswell", "", ""},
                        BlasChoice{Verdict::kChose, "Cooperlake", "Prescott", ""},
                        BlasChoice{Verdict::kRefused, "SkylakeX", "Prescott", "wrong products: addmm: off\tby 3x"}}) {
    const auto back = decode_blas_choice(encode_blas_choice(c));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->verdict, c.verdict);
    EXPECT_EQ(back->kernel, c.kernel);
    EXPECT_EQ(back->detected, c.detected);
    EXPECT_EQ(back->why, c.why);
  }
  EXPECT_FALSE(decode_blas_choice(""));
  EXPECT_FALSE(decode_blas_choice("chose Cooperlake over Prescott"));  // the old free text
  EXPECT_FALSE(decode_blas_choice("picked\tA\tB\t"));
}

}  // namespace
}  // namespace trident::process
