// The run's records that rank 0 merges from every rank: trace.json and ops.json.
#include <algorithm>

#include "trident/base/files.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {

std::vector<std::string> Trainer::gather_strings(const std::string& mine) const {
  return size_ > 1 ? comm::allgather_strings(*group_, mine, "gathering the ranks' traces") : std::vector<std::string>{mine};
}

void Trainer::write_trace() const {
  std::vector<executor::TraceEvent> mine;
  for (const auto& step : trace_) mine.insert(mine.end(), step.events.begin(), step.events.end());
  const auto all = gather_strings(to_json(mine).dump());
  if (!leader()) return;
  nlohmann::json meta{{"model", config_.model.name + "/" + config_.model.preset},
                      {"steps", trace_.size()},
                      {"mini_batch", config_.train.mini_batch},
                      {"threads", threads_.threads}};
  write_file_atomic(run_dir_ + "/trace.json",
                    executor::merged_trace(all, &plan_, std::move(meta)).dump() + "\n");
}

namespace {

// One rank's part of ops.json: its ops by self time per step, largest first.
nlohmann::json rank_ops(const nn::OpProfile& profile, std::int64_t steps, const ErrorContext& where) {
  std::vector<std::pair<std::string, nn::OpTotals>> ops;
  double self_s = 0;
  for (const auto& [name, totals] : profile.totals()) {
    ops.emplace_back(name, totals);
    self_s += totals.self_s;
  }
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.self_s > b.second.self_s; });
  const double per_step_ms = 1e3 / static_cast<double>(steps);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [name, totals] : ops)
    rows.push_back({{"op", name},
                    {"self_ms_per_step", totals.self_s * per_step_ms},
                    {"calls_per_step", static_cast<double>(totals.calls) / static_cast<double>(steps)}});
  return {{"rank", where.rank.value_or(0)},
          {"stage", where.stage.value_or(-1)},
          {"replica", where.replica.value_or(0)},
          {"step_ms", profile.wall_s() * per_step_ms},
          {"op_self_ms_per_step", self_s * per_step_ms},
          {"outside_ops_ms_per_step", (profile.wall_s() - self_s) * per_step_ms},
          {"ops", std::move(rows)}};
}

}  // namespace

void Trainer::write_op_profile() {
  if (!op_profile_) return;
  op_profile_->stop();
  const auto steps = step_ - profiled_from_;
  const auto all = gather_strings(rank_ops(*op_profile_, steps, where()).dump());
  op_profile_.reset();
  if (!leader()) return;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& one : all) ranks.push_back(nlohmann::json::parse(one));
  const nlohmann::json file{{"model", config_.model.name + "/" + config_.model.preset},
                            {"steps", steps},
                            {"after_step", profiled_from_},
                            {"mini_batch", config_.train.mini_batch},
                            {"threads", threads_.threads},
                            {"ranks", std::move(ranks)}};
  write_file_atomic(run_dir_ + "/ops.json", file.dump(1) + "\n");
}

}  // namespace trident::runtime
