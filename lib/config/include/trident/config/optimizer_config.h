// The optimizer's settings (the config's `optimizer` section), on their own so
// that the optimizers and whatever holds their state need not see the rest of
// the training config.
#pragma once

#include <cstdint>
#include <string>

namespace trident::config {

struct OptimizerConfig {
  std::string name = "sgd";  // sgd | adam | adamw
  double lr = 0.05;
  double momentum = 0.9;     // sgd
  double weight_decay = 0.0; // sgd, adam: L2 added to the gradient; adamw: decoupled
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  std::string schedule = "constant";  // constant | cosine | linear | step
  std::int64_t warmup_steps = 0;
  double min_lr = 0.0;  // cosine and linear: the rate at the last step
  std::int64_t step_size = 0;  // step: the rate is multiplied by gamma every step_size steps
  double gamma = 0.1;
  // > 0: gradients are scaled so that their global L2 norm (every parameter
  // of the model, once) is at most this (see Note [Global gradient norm]).
  double clip_norm = 0;
};

}  // namespace trident::config
