// The multi-rank half of the Trainer: joining the ranks, agreeing on one
// plan, and the few collectives the training loop needs.
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "trident/plan/plan.h"
#include "trident/base/files.h"
#include "trident/base/json.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {
namespace {

// "line 7: 'a' vs 'b'" for the first line where two texts differ.
std::string first_line_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(sa, la)), gb = static_cast<bool>(std::getline(sb, lb));
    if (!ga && !gb) return "";
    if (!ga || !gb || la != lb)
      return "line " + std::to_string(line) + ": '" + (ga ? la : "") + "' vs '" + (gb ? lb : "") + "'";
  }
}

}  // namespace

void Trainer::join(std::optional<comm::Group> world) {
  const auto& par = config_.parallel;
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(par.timeout_s * 1000));
  if (world) {
    group_ = std::move(world);
    local_processes_ = group_->size();  // a test's ranks, all in this process
  } else if (par.devices == 1) {
    group_ = comm::Group::over_store(c10::make_intrusive<c10d::HashStore>(), 0, 1, timeout);
  } else {
    const auto info = comm::world_from_env();
    if (info.world_size != par.devices) {
      throw config::ConfigError("parallel.devices = " + std::to_string(par.devices) + " but the launcher started " +
                                std::to_string(info.world_size) + " process(es) (" + info.launcher +
                                "); start it with `trident train --nproc " + std::to_string(par.devices) +
                                " ...` or `trident launch --nproc " + std::to_string(par.devices) + " -- train ...`");
    }
    group_ = comm::Group::connect(info, timeout);
    local_processes_ = info.local_size;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    out_ << "rank " << info.rank << "/" << info.world_size << " on " << host << " (pid " << getpid()
         << "), rendezvous " << info.master_addr << ":" << info.master_port << " ok" << std::endl;
  }
  rank_ = group_->rank(), size_ = group_->size();
  if (size_ != par.devices)
    throw config::ConfigError("parallel.devices = " + std::to_string(par.devices) + " but the group has " +
                              std::to_string(size_) + " ranks");
  if (size_ == 1) return;
  // Preflight: a tiny all-reduce proves every rank is connected.
  auto probe = torch::ones({1});
  std::vector<at::Tensor> t{probe};
  try {
    group_->pg().allreduce(t)->wait(timeout);
  } catch (const std::exception& e) {
    ErrorContext where;
    where.rank = rank_;
    throw comm::CommError("preflight all-reduce failed: " + first_line(e), ErrorKind::kFailure, where);
  }
  if (probe.item<double>() != size_)
    throw comm::CommError("preflight all-reduce gave " + std::to_string(probe.item<double>()) + ", expected " +
                          std::to_string(size_));
}

// docs/design.md, contract "The run keeps the plan": the plan is made once. Rank 0 plans; every rank sends
// its resolved config (and the plan it read, for a plan file) and all check
// that they agree with rank 0, so every rank fails alike, naming the rank
// and the first difference.
void Trainer::agree_on_plan(const graph::OpGraph& graph) {
  std::optional<PipelinePlan> mine;
  if (leader() || plan_from_file(config_.parallel)) mine = plan_for(config_, graph);
  const nlohmann::json sent{{"config", config_.to_yaml()},
                            {"plan", mine ? mine->plan.to_json() : nlohmann::json()}};
  const auto all = gather_strings(sent.dump());
  const auto root = nlohmann::json::parse(all.at(0));
  for (int r = 1; r < static_cast<int>(all.size()); ++r) {
    const auto theirs = nlohmann::json::parse(all[r]);
    const auto config_diff = first_line_difference(root.at("config"), theirs.at("config"));
    if (!config_diff.empty())
      throw config::ConfigError("rank " + std::to_string(r) + " was started with another config than rank 0 (" +
                                config_diff + "); start every rank with the same --config and --set");
    if (!theirs.at("plan").is_null()) {
      const auto plan_diff = first_difference(root.at("plan"), theirs.at("plan"));
      if (!plan_diff.empty())
        throw config::ConfigError("rank " + std::to_string(r) + " holds another plan than rank 0: " + plan_diff +
                                  "; give every rank the same plan file");
    }
  }
  plan_ = plan::Plan::from_json(root.at("plan"), "the plan from rank 0");
  plan::validate_plan(plan_, graph);  // from_json leaves the edges out; this rebuilds them
  if (config_.parallel.staleness > 0 && plan_.stages.size() > 1)  // See Note [Staleness] in sync/grad_sync.h
    throw config::ConfigError("parallel.staleness = " + std::to_string(config_.parallel.staleness) +
                              ": applies to data-parallel replicas, but the plan " + config_.parallel.partitioner + " has " +
                              std::to_string(plan_.stages.size()) + " stages; use a one-stage plan, or staleness 0");
  if (leader() && size_ > 1) out_ << mine->table;
  if (leader()) write_file_atomic(run_dir_ + "/plan.json", plan_.to_json().dump(1) + "\n");
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> values) const {
  if (size_ == 1) return values;
  auto t = torch::tensor(values, torch::kFloat64);
  std::vector<at::Tensor> v{t};
  try {
    group_->pg().allreduce(v)->wait(group_->timeout());
  } catch (const std::exception& e) {
    const auto lost = group_->diagnose();
    throw comm::CommError("step " + std::to_string(step_) + ": all-reduce of the loss failed" +
                              (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e),
                          ErrorKind::kFailure, where());
  }
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

}  // namespace trident::runtime
