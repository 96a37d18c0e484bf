// Placement on a GPU (scripts/gpu-check.sh runs these on a GPU; without one
// they are skipped, saying why).
#include <gtest/gtest.h>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "trident/executor/tensor_placement.h"
#include "trident/executor/trace.h"

namespace trident::executor {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible"

// See Note [GPU spans]: the host queues milliseconds of GPU work in far less
// time; the clock's marks around it span the GPU's time, on the system clock.
TEST(CudaClock, MarksTimeTheGpuWorkBetweenThemOnTheSystemClock) {
  SKIP_WITHOUT_GPU();
  const auto placement = Placement::choose("cuda", 0);
  auto clock = placement.clock();
  ASSERT_TRUE(clock);
  auto a = torch::randn({2048, 2048}, torch::TensorOptions().device(placement.device())) / 64;
  torch::cuda::synchronize();
  const auto before = now_us();
  const auto first = clock->mark();
  for (int i = 0; i < 50; ++i) a = a.mm(a).tanh();
  const auto second = clock->mark();
  const auto queued = now_us() - before;
  const auto at = clock->times();
  const auto after = now_us();
  ASSERT_EQ(at.size(), 2u);
  ASSERT_EQ(first, 0);
  ASSERT_EQ(second, 1);
  EXPECT_GE(at[0], before - 1000) << "the first mark lies before the host made it";
  EXPECT_LE(at[1], after + 1000) << "the second mark lies after the host had waited for it";
  EXPECT_GT(at[1] - at[0], queued) << "the span is the host's queueing time, not the GPU's";
  EXPECT_EQ(clock->mark(), 0) << "marks are counted from 0 again after times()";
}

}  // namespace
}  // namespace trident::executor
