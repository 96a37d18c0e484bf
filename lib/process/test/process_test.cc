// This process's settings: the thread count chosen and applied, and what the
// CPU is asked about.
#include "trident/process/process.h"

#include <gtest/gtest.h>

#include <torch/torch.h>

#include "trident/base/cores.h"

namespace trident::process {
namespace {

// See Note [Thread defaults]: the cores are divided among this host's processes.
TEST(Process, DividesTheCoresAmongTheProcessesOnThisHost) {
  EXPECT_EQ(choose_threads(0, 2, 1).threads, 2);
  EXPECT_EQ(choose_threads(0, 2, 2).threads, 1);
  EXPECT_EQ(choose_threads(0, 2, 5).threads, 1);  // never 0
  EXPECT_EQ(choose_threads(0, 16, 3).threads, 5);
  EXPECT_EQ(choose_threads(0, 16, 3).reason, "16 cores / 3 processes on this host");
  EXPECT_EQ(choose_threads(3, 16, 4).threads, 3);  // asked for: kept
  EXPECT_GE(usable_cores(), 1);
}

// The count chosen is the one LibTorch's intra-op pool runs with afterwards.
TEST(Process, ConfiguringSetsTheThreadsLibTorchRunsWith) {
  const int before = torch::get_num_threads();
  configure_process(3);
  EXPECT_EQ(torch::get_num_threads(), 3);
  configure_process(1);
  EXPECT_EQ(torch::get_num_threads(), 1);
  configure_process(before);
}

// /proc/cpuinfo's flags, padded so that " flag " finds a whole word; bf16 is
// native exactly when one of the two flags that give it is there.
TEST(Process, CpuFlagsAreWholeWordsAndDecideBf16) {
  const auto flags = cpu_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  EXPECT_EQ(flags.front(), ' ');
  EXPECT_EQ(flags.back(), ' ');
  const bool native = flags.find(" avx512_bf16 ") != std::string::npos || flags.find(" amx_bf16 ") != std::string::npos;
  EXPECT_EQ(cpu_has_bf16(), native);
}

}  // namespace
}  // namespace trident::process
