// Checkpoints keyed by parameter name (docs/design.md, contract "Checkpoints are keyed by parameter name"): the weights,
// the optimizer state per parameter, and a JSON record (step, config, ...).
// One file, written atomically: a temporary file in the same directory,
// flushed to disk, then renamed over the old one — a crash mid-write leaves
// the previous checkpoint intact.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "trident/optim/optimizer.h"

namespace trident::checkpoint {

struct Checkpoint {
  std::int64_t step = 0;  // optimizer steps completed
  nlohmann::json meta = nlohmann::json::object();
  std::map<std::string, torch::Tensor> params;
  std::map<std::string, optim::ParamState> optimizer;
};

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// Throws CheckpointError naming the path when missing or unreadable.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace trident::checkpoint
