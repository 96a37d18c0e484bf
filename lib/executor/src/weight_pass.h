// WeightPass: a split backward's W (Note [Split backward] in
// schedule/schedule.h) that computes the weight gradients alone, from the
// gradients B already computed. Internal to lib/executor.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

namespace trident::executor {

// Note [Split backward at the weights]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// B runs autograd from the stage's roots (its loss, its outputs' gradients)
// asking only for the gradients of its inputs, so it executes exactly the
// nodes on paths to the inputs (the input side) and each of them leaves out
// its outputs towards the weights. W must compute those outputs and carry
// them to the weights — nothing else. A node of the input side with an
// edge into the weights-only part of the graph (an addmm's mat2, a
// convolution's weight and bias, a cat fed by an embedding) is an
// *intermediate*: before B a hook on it records the gradients it receives
// there, the same ones a single backward would give it. W then runs autograd
// once, from the intermediates, with those gradients, to their parameters,
// each intermediate's edges into the input side cut for the call: so an
// intermediate computes its weight-side outputs alone (dW and db, not dX
// again), the engine walks only the weights-only part (W stays linear in
// the stage's depth), and the weights-only nodes below it (a transpose, a
// cast) run as in one backward. Every weight gradient comes from the same
// tensors by the same formulas as one process's, accumulated into .grad as
// one backward does.
//
// Parameters that share an intermediate, or a node below one, form a group.
// A group falls back to a second pass over the whole graph (autograd from the
// roots, with the group's parameters as targets; see Note [Two-pass split
// backward]) when that would double a gradient or miss one: when an
// intermediate reaches a parameter of its group through the input side too
// (x @ w @ w: the later product's input gradient feeds the earlier one,
// whose hook already holds it), when a root reaches a parameter without
// passing the input side (a stage with no differentiable input: B computes
// nothing and W is its whole backward), or when a hook did not fire.
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
