// Optimizers that update one named parameter at a time and keep their state
// by parameter name. Per-parameter steps let a parameter-server shard update
// only the parameters it owns (optimizer state lives on the owner), and
// by-name state lets a checkpoint resume under another plan.
// The update rules equal torch.optim.SGD (dampening 0, no Nesterov),
// torch.optim.Adam (no AMSGrad; weight decay added to the gradient) and
// torch.optim.AdamW (decoupled weight decay) of PyTorch 1.13.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "trident/config/optimizer_config.h"

namespace trident::optim {

// Slot name -> tensor, e.g. "momentum_buffer", "exp_avg", "step".
using ParamState = std::map<std::string, torch::Tensor>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  static std::unique_ptr<Optimizer> make(const config::OptimizerConfig& config);

  // Applies one update to `param` (in place, without autograd) from `grad`.
  virtual void step(const std::string& name, torch::Tensor& param, const torch::Tensor& grad, double lr) = 0;

  // One step for every named parameter that has a gradient, then zeroes the
  // gradients (kept allocated for the next backward).
  void apply(const std::vector<std::pair<std::string, torch::Tensor>>& params, double lr);

  const std::map<std::string, ParamState>& state() const { return state_; }
  void load_state(std::map<std::string, ParamState> state) { state_ = std::move(state); }

 protected:
  std::map<std::string, ParamState> state_;
};

// Learning rate at `step` (0-based) of `total_steps`: linear warm-up over
// warmup_steps, then constant; cosine or linear decay to min_lr at the last
// step; or step decay (times gamma every step_size steps after the warm-up,
// as torch's StepLR counted in optimizer steps).
double learning_rate(const config::OptimizerConfig& config, std::int64_t step, std::int64_t total_steps);

}  // namespace trident::optim
