// WeightPass: a split backward's W (Note [Split backward] in
// schedule/schedule.h) that computes the weight gradients alone, from the
// gradients B already computed. Internal to lib/executor.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

namespace trident::executor {

class WeightPass {
 public:
  // Walks the graph of `roots` (tensors whose gradients B is given) once;
  // `inputs` are the leaves whose gradients B computes, `params` the
  // stage's trainable parameters. Hooks the intermediates until B is done.
  WeightPass(const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& inputs,
             const std::vector<torch::Tensor>& params);
  ~WeightPass();
  WeightPass(const WeightPass&) = delete;
  WeightPass& operator=(const WeightPass&) = delete;

  // After B: removes the hooks (what they recorded stays).
  void unhook();
  // W: accumulates every parameter's gradient into .grad and releases the
  // graph; `roots` and `grads` are B's, for the groups that fall back.
  void run(const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& grads);

  // For tests: parameters W reaches from the intermediates, and those it
  // runs the second pass for.
  int deferred_params() const;
  int fallback_params() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace trident::executor
