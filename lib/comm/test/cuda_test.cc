// Collectives on CUDA tensors at world size 1 (scripts/gpu-check.sh runs
// these on a GPU; without one they are skipped, saying why). Note
// [Backends]: in the CUDA build a group carries CUDA tensors by NCCL.
#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "trident/comm/group.h"

namespace trident::comm {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (" << backend_names() << ")"

void wait(const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait(std::chrono::seconds(60));
  torch::cuda::synchronize();
}

TEST(CudaCollectives, EveryCollectiveAtWorldSizeOneLeavesItsTensorOnTheGpu) {
  SKIP_WITHOUT_GPU();
  auto group = Group::over_store(c10::make_intrusive<c10d::HashStore>(), 0, 1, std::chrono::seconds(60));
  const auto x = torch::arange(12, torch::kFloat32).view({3, 4}).to(torch::kCUDA);
  std::vector<at::Tensor> t{x.clone()};
  wait(group.pg().allreduce(t));
  EXPECT_TRUE(t[0].is_cuda());
  // Bitwise: a collective over one rank copies; no arithmetic.
  EXPECT_TRUE(torch::equal(t[0].cpu(), x.cpu()));
  wait(group.pg().broadcast(t));
  EXPECT_TRUE(torch::equal(t[0].cpu(), x.cpu()));
  c10d::ReduceOptions ro;
  wait(group.pg().reduce(t, ro));
  EXPECT_TRUE(torch::equal(t[0].cpu(), x.cpu()));
  std::vector<std::vector<at::Tensor>> out{{torch::zeros_like(x)}};
  std::vector<at::Tensor> in{x};
  wait(group.pg().allgather(out, in));
  EXPECT_TRUE(torch::equal(out[0][0].cpu(), x.cpu()));
  // A CPU tensor in the same group takes the CPU backend.
  std::vector<at::Tensor> host{torch::ones({2})};
  wait(group.pg().allreduce(host));
  // Bitwise: a copy.
  EXPECT_TRUE(torch::equal(host[0], torch::ones({2})));
}

}  // namespace
}  // namespace trident::comm
