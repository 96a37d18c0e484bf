// WeightPass (Note [Weight pass]): B, then W from what B's
// hooks recorded, gives each parameter the gradient of one backward, bit for
// bit, and W runs no input-side node again unless it must.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "../src/weight_pass.h"

namespace trident::executor {
namespace {

// Identity whose backward counts its runs: placed on the input side, it
// tells whether W went down that side again.
struct Counted : torch::autograd::Function<Counted> {
  static int runs;
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list g) {
    ++runs;
    return {g[0].clone()};
  }
};
int Counted::runs = 0;

struct Graph {
  std::vector<torch::Tensor> inputs, params;
  torch::Tensor loss;
};
using Build = std::function<Graph()>;

// Fresh leaves each time, from one seed, so two builds hold equal values.
torch::Tensor leaf(std::vector<std::int64_t> shape, int seed) {
  torch::manual_seed(seed);
  return torch::randn(shape).requires_grad_(true);
}

// The gradients of one backward.
std::vector<torch::Tensor> whole(const Build& build) {
  auto g = build();
  g.loss.backward();
  std::vector<torch::Tensor> out;
  for (auto& t : g.inputs) out.push_back(t.grad());
  for (auto& p : g.params) out.push_back(p.grad());
  return out;
}

struct Split {
  std::vector<torch::Tensor> grads;
  int deferred = 0, fallback = 0, counted_in_w = 0;
};

// B (the inputs' gradients), then W through a WeightPass.
Split split(const Build& build) {
  auto g = build();
  const std::vector<torch::Tensor> roots{g.loss}, seeds{torch::ones_like(g.loss)};
  WeightPass pass(roots, g.inputs, g.params);
  std::vector<torch::Tensor> input_grads(g.inputs.size());
  if (!g.inputs.empty())
    input_grads = torch::autograd::grad(roots, g.inputs, seeds, /*retain_graph=*/true, false, /*allow_unused=*/true);
  pass.unhook();
  for (auto& p : g.params) EXPECT_FALSE(p.grad().defined()) << "B computed a weight gradient";
  const int before = Counted::runs;
  pass.run(roots, seeds);
  Split s;
  s.grads = input_grads;
  for (auto& p : g.params) s.grads.push_back(p.grad());
  s.deferred = pass.deferred_params(), s.fallback = pass.fallback_params();
  s.counted_in_w = Counted::runs - before;
  return s;
}

void expect_bitwise(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << "gradient " << i;
    // Bitwise: both backwards run in this process over the same autograd nodes and tensors (W calls the nodes
    // B skipped, with the gradients B recorded): the same kernels on the same shapes.
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "gradient " << i << " differs by " << (a[i] - b[i]).abs().max().item<double>();
  }
}

TEST(WeightPass, AChainsWeightsComeFromTheIntermediatesAndTheInputSideRunsOnce) {
  const Build mlp = [] {
    Graph g;
    auto x = leaf({16, 8}, 1);
    auto w1 = leaf({12, 8}, 2), b1 = leaf({12}, 3), w2 = leaf({4, 12}, 4), b2 = leaf({4}, 5);
    auto h = Counted::apply(torch::relu(torch::linear(x, w1, b1)));
    g.loss = torch::linear(h, w2, b2).pow(2).sum();
    g.inputs = {x}, g.params = {w1, b1, w2, b2};
    return g;
  };
  const auto s = split(mlp);
  expect_bitwise(s.grads, whole(mlp));
  EXPECT_EQ(s.deferred, 4);
  EXPECT_EQ(s.fallback, 0);
  EXPECT_EQ(s.counted_in_w, 0) << "W ran the input side again";
}

TEST(WeightPass, ConvolutionsAndAnEmbeddingJoinedByCatAreDeferred) {
  const Build model = [] {
    Graph g;
    auto x = leaf({2, 3, 6, 6}, 1);
    auto k = leaf({4, 3, 3, 3}, 2), kb = leaf({4}, 3), table = leaf({10, 5}, 4), w = leaf({3, 4 * 16 + 5}, 5);
    auto idx = torch::tensor({1, 7}, torch::kLong);
    auto feat = torch::conv2d(x, k, kb).flatten(1);
    auto joined = torch::cat({Counted::apply(feat), torch::embedding(table, idx)}, 1);
    g.loss = torch::linear(joined, w).sum();
    g.inputs = {x}, g.params = {k, kb, table, w};
    return g;
  };
  const auto s = split(model);
  expect_bitwise(s.grads, whole(model));
  EXPECT_EQ(s.deferred, 4);
  EXPECT_EQ(s.counted_in_w, 0);
}

TEST(WeightPass, AWeightTiedAcrossTwoBranchesIsOneGroup) {
  const Build tied = [] {
    Graph g;
    auto x1 = leaf({5, 6}, 1), x2 = leaf({5, 6}, 2), w = leaf({6, 6}, 3);
    g.loss = (x1.mm(w).tanh() * x2.mm(w)).sum();
    g.inputs = {x1, x2}, g.params = {w};
    return g;
  };
  const auto s = split(tied);
  expect_bitwise(s.grads, whole(tied));
  EXPECT_EQ(s.deferred, 1);
  EXPECT_EQ(s.fallback, 0);
}

TEST(WeightPass, AWeightReadTwiceOnOnePathFallsBackToTheSecondPass) {
  const Build twice = [] {  // x @ w @ w: the later product's input gradient feeds the earlier one
    Graph g;
    auto x = leaf({4, 6}, 1), w = leaf({6, 6}, 2), v = leaf({6, 3}, 3);
    g.loss = Counted::apply(x.mm(w).mm(w)).mm(v).sum();
    g.inputs = {x}, g.params = {w, v};
    return g;
  };
  const auto s = split(twice);
  expect_bitwise(s.grads, whole(twice));
  EXPECT_EQ(s.deferred, 1);  // v
  EXPECT_EQ(s.fallback, 1);  // w
  EXPECT_EQ(s.counted_in_w, 1);
}

TEST(WeightPass, WithoutInputsOrPastTheInputSideWIsTheSecondPass) {
  const Build source = [] {  // a source stage: no differentiable input, B computes nothing
    Graph g;
    auto w = leaf({3, 3}, 1);
    g.loss = (torch::ones({2, 3}).mm(w)).sum();
    g.params = {w};
    return g;
  };
  const auto s = split(source);
  expect_bitwise(s.grads, whole(source));
  EXPECT_EQ(s.fallback, 1);
  const Build regularised = [] {  // w reaches the loss through x's product and on its own
    Graph g;
    auto x = leaf({4, 3}, 1), w = leaf({3, 3}, 2);
    g.loss = x.mm(w).sum() + w.pow(2).sum();
    g.inputs = {x}, g.params = {w};
    return g;
  };
  const auto r = split(regularised);
  expect_bitwise(r.grads, whole(regularised));
  EXPECT_EQ(r.fallback, 1);
}

}  // namespace
}  // namespace trident::executor
