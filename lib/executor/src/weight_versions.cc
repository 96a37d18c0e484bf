#include "trident/executor/weight_versions.h"

#include "trident/executor/stage_executor.h"

namespace trident::executor {

WeightVersions::WeightVersions(sync::NamedParams params, std::int64_t version) : params_(std::move(params)) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : params_) {
    buffers_[slot(version)].push_back(p.variable_data());  // the parameter's own storage
    buffers_[slot(version - 1)].push_back(p.detach().clone());
  }
  held_[slot(version)] = version, held_[slot(version - 1)] = version - 1;
  pointed_ = slot(version);
}

void WeightVersions::use(std::int64_t v) {
  const int s = slot(v);
  if (held_[s] != v)
    throw PipelineError("weight version " + std::to_string(v) + " is not resident (the stage holds versions " +
                        std::to_string(held_[0]) + " and " + std::to_string(held_[1]) + ")");
  if (pointed_ == s) return;
  for (std::size_t i = 0; i < params_.size(); ++i) params_[i].second.set_data(buffers_[s][i]);
  pointed_ = s;
}

void WeightVersions::begin_update(const std::set<std::int64_t>& in_use) {
  const auto n = newest();
  if (in_use.count(n - 1))
    throw PipelineError("the update to weight version " + std::to_string(n + 1) + " would overwrite version " +
                        std::to_string(n - 1) + ", which a micro-batch in flight still uses: a third version would be "
                        "needed (see Note [Delayed pipelines])");
  torch::NoGradGuard no_grad;
  const int to = slot(n + 1), from = slot(n);
  for (std::size_t i = 0; i < params_.size(); ++i) buffers_[to][i].copy_(buffers_[from][i]);
  held_[to] = n + 1;
  use(n + 1);
}

std::map<std::string, torch::Tensor> WeightVersions::older() const {
  std::map<std::string, torch::Tensor> out;
  const int s = slot(newest() - 1);
  for (std::size_t i = 0; i < params_.size(); ++i) out[params_[i].first] = buffers_[s][i];
  return out;
}

void WeightVersions::load_older(const std::map<std::string, torch::Tensor>& weights) {
  torch::NoGradGuard no_grad;
  const int s = slot(newest() - 1);
  for (std::size_t i = 0; i < params_.size(); ++i) buffers_[s][i].copy_(weights.at(params_[i].first));
}

void WeightVersions::reset(std::int64_t v) {
  torch::NoGradGuard no_grad;
  const int other = 1 - pointed_;
  if (slot(v) != pointed_) {  // relabel: the parameters' buffer holds v
    std::swap(buffers_[0], buffers_[1]);
    pointed_ = other;
  }
  for (std::size_t i = 0; i < params_.size(); ++i) buffers_[1 - pointed_][i].copy_(buffers_[pointed_][i]);
  held_[pointed_] = v, held_[1 - pointed_] = v - 1;
}

sync::GradSync::Update WeightVersions::unseen(sync::GradSync::Update update) {
  return [update = std::move(update)](const std::string& name, torch::Tensor& p, const torch::Tensor& grad) {
    auto data = p.variable_data();
    update(name, data, grad);
  };
}

}  // namespace trident::executor
