// Helpers of the planner's tests: random small models for the exhaustive
// checks (a DAG of linear, activation and concat ops of random widths on one
// input, joined into a classifier; deterministic for a seed), zoo graphs,
// and planners on a cluster preset's analytic model.
#pragma once

#include <map>
#include <optional>
#include <random>
#include <string>

#include "trident/cost/cluster.h"
#include "trident/cost/cost_model.h"
#include "trident/planner/planner.h"
#include "trident/zoo/builder.h"
#include "trident/zoo/zoo.h"

namespace trident::planner::testing {

inline graph::OpGraph random_model(std::mt19937& rng, int max_ops) {
  zoo::GraphBuilder b("random");
  const graph::TensorSpec x_spec{{64}, graph::DType::kFloat32};
  std::vector<graph::OpId> ops{b.input("x", x_spec)};
  std::vector<int> uses{0};
  const std::int64_t widths[] = {64, 256, 512, 1024, 2048, 4096};
  int count = 0;
  auto name = [&] { return "op" + std::to_string(count); };
  auto pick = [&] {  // favour recent tensors so chains and branches both appear
    const int n = static_cast<int>(ops.size());
    return static_cast<int>(rng() % 2 ? n - 1 - rng() % std::min(n, 3) : rng() % n);
  };
  const int body = 2 + static_cast<int>(rng() % (max_ops - 4));  // leaves room for join, head, loss
  while (count < body) {
    const int r = count == 0 ? 0 : static_cast<int>(rng() % 10), a = count == 0 ? 0 : pick();
    graph::OpId id;
    if (r < 6 || b.spec(ops[a]).shape[0] > 8192) {
      id = b.linear(name(), ops[a], widths[rng() % 6]);
    } else if (r < 8) {
      const int c = pick();
      if (c == a) continue;
      id = b.concat(name(), {ops[a], ops[c]}, 0);
      ++uses[c];
    } else {
      id = b.activation(name(), "relu", ops[a]);
    }
    ++uses[a];
    ops.push_back(id), uses.push_back(0), ++count;
  }
  std::vector<graph::OpId> loose;
  for (std::size_t i = 1; i < ops.size(); ++i)
    if (!uses[i]) loose.push_back(ops[i]);
  graph::OpId top = loose.size() > 1 ? b.concat("join", loose, 0) : loose[0];
  auto label = b.input("label", {{}, graph::DType::kInt64}, 8);
  b.cross_entropy("loss", b.linear("head", top, 8), label);
  return b.finish();
}

// A random series-parallel model: a chain whose links are single layers or
// fan-outs into 2-3 branches of 1-2 layers joined by a concat, the shape of
// the zoo's branchy models.
inline graph::OpGraph random_sp_model(std::mt19937& rng, int max_ops) {
  zoo::GraphBuilder b("random_sp");
  const std::int64_t widths[] = {64, 256, 512, 1024, 2048, 4096};
  graph::OpId x = b.input("x", {{64}, graph::DType::kFloat32});
  int count = 0;
  auto name = [&] { return "op" + std::to_string(count++); };
  const int body = max_ops - 2;  // head and loss
  x = b.linear(name(), x, widths[rng() % 6]);
  while (count < body) {
    const int left = body - count;
    if (left >= 4 && rng() % 2) {
      const int branches = 2 + static_cast<int>(rng() % std::min(2, (left - 1) / 2));
      std::vector<graph::OpId> outs;
      for (int k = 0; k < branches; ++k) {
        graph::OpId y = b.linear(name(), x, widths[rng() % 6]);
        if (count < body - (branches - k) && rng() % 2) y = b.linear(name(), y, widths[rng() % 6]);
        outs.push_back(y);
      }
      x = b.concat(name(), outs, 0);
    } else {
      x = rng() % 3 ? b.linear(name(), x, widths[rng() % 6]) : b.activation(name(), "relu", x);
    }
  }
  auto label = b.input("label", {{}, graph::DType::kInt64}, 8);
  b.cross_entropy("loss", b.linear("head", x, 8), label);
  return b.finish();
}

// A zoo model's graph, built once per (name, preset).
inline const graph::OpGraph& model(const std::string& name, const std::string& preset) {
  static std::map<std::string, graph::OpGraph> graphs;
  auto& g = graphs[name + "/" + preset];
  if (g.size() == 0) g = zoo::build_graph({name, preset});
  return g;
}

// A planner for the analytic model of a cluster preset.
inline Planner planner(const graph::OpGraph& g, const std::string& cluster, int devices, int mini,
                       const std::string& partitioner, std::optional<int> micro = std::nullopt,
                       const std::string& schedule = "") {
  auto c = cost::load_cluster(cluster);
  PlanRequest r;
  r.model = g.name(), r.preset = "?", r.devices = devices, r.mini_batch = mini, r.partitioner = partitioner;
  r.micro_batch = micro, r.schedule = schedule;
  return Planner(g, c, cost::analytic_cost_model(c.device), r);
}

}  // namespace trident::planner::testing
