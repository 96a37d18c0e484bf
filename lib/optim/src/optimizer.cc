#include "trident/optim/optimizer.h"

#include "trident/config/config.h"  // ConfigError

#include <cmath>

namespace trident::optim {
namespace {

class Sgd : public Optimizer {
 public:
  explicit Sgd(const config::OptimizerConfig& c) : c_(c) {}
  void step(const std::string& name, torch::Tensor& p, const torch::Tensor& grad, double lr) override {
    torch::NoGradGuard no_grad;
    auto d = c_.weight_decay != 0 ? grad.add(p, c_.weight_decay) : grad;
    if (c_.momentum != 0) {
      auto& slots = state_[name];
      auto it = slots.find("momentum_buffer");
      if (it == slots.end()) {
        d = slots["momentum_buffer"] = d.clone();
      } else {
        d = it->second.mul_(c_.momentum).add_(d);
      }
    }
    p.add_(d, -lr);
  }

 private:
  config::OptimizerConfig c_;
};

// Adam, and with `decoupled` AdamW: the weights decay by lr · weight_decay
// before the update instead of the decay joining the gradient.
class Adam : public Optimizer {
 public:
  Adam(const config::OptimizerConfig& c, bool decoupled) : c_(c), decoupled_(decoupled) {}
  void step(const std::string& name, torch::Tensor& p, const torch::Tensor& grad, double lr) override {
    torch::NoGradGuard no_grad;
    auto& s = state_[name];
    if (s.empty()) {
      s["step"] = torch::zeros({}, torch::kFloat64);
      s["exp_avg"] = torch::zeros_like(p);
      s["exp_avg_sq"] = torch::zeros_like(p);
    }
    s["step"].add_(1);
    const double t = s["step"].item<double>();
    if (decoupled_ && c_.weight_decay != 0) p.mul_(1 - lr * c_.weight_decay);
    auto g = !decoupled_ && c_.weight_decay != 0 ? grad.add(p, c_.weight_decay) : grad;
    s["exp_avg"].mul_(c_.beta1).add_(g, 1 - c_.beta1);
    s["exp_avg_sq"].mul_(c_.beta2).addcmul_(g, g, 1 - c_.beta2);
    const double bc1 = 1 - std::pow(c_.beta1, t), bc2 = 1 - std::pow(c_.beta2, t);
    // The denominator in chunks: a whole one would be two temporaries the
    // size of the parameter (128 MiB for a 4096 x 4096 layer) on top of the
    // planned weights, gradients and state. Element-wise, so the result is
    // the same bit for bit.
    constexpr std::int64_t kChunk = 1 << 18;
    auto flat_p = p.view(-1), avg = s["exp_avg"].view(-1), sq = s["exp_avg_sq"].view(-1);
    for (std::int64_t i = 0, n = p.numel(); i < n; i += kChunk) {
      const auto len = std::min(kChunk, n - i);
      auto denom = sq.narrow(0, i, len).sqrt().div_(std::sqrt(bc2)).add_(c_.eps);
      flat_p.narrow(0, i, len).addcdiv_(avg.narrow(0, i, len), denom, -lr / bc1);
    }
  }

 private:
  config::OptimizerConfig c_;
  bool decoupled_;
};

}  // namespace

void Optimizer::apply(const std::vector<std::pair<std::string, torch::Tensor>>& params, double lr) {
  for (const auto& [name, param] : params) {
    torch::Tensor p = param;  // a handle: the update reaches the parameter
    if (!p.grad().defined()) continue;
    step(name, p, p.grad(), lr);
    p.mutable_grad().zero_();
  }
}

std::unique_ptr<Optimizer> Optimizer::make(const config::OptimizerConfig& config) {
  if (config.name == "sgd") return std::make_unique<Sgd>(config);
  if (config.name == "adam") return std::make_unique<Adam>(config, false);
  if (config.name == "adamw") return std::make_unique<Adam>(config, true);
  throw config::ConfigError("optimizer.name = '" + config.name + "': allowed: sgd, adam, adamw");
}

double learning_rate(const config::OptimizerConfig& c, std::int64_t step, std::int64_t total_steps) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  const std::int64_t after = step - c.warmup_steps;
  if (c.schedule == "step") return c.lr * std::pow(c.gamma, static_cast<double>(after / c.step_size));
  if (c.schedule != "cosine" && c.schedule != "linear") return c.lr;
  const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps - 1 - c.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(after) / span);
  if (c.schedule == "linear") return c.lr + (c.min_lr - c.lr) * progress;
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(M_PI * progress));
}

}  // namespace trident::optim
