// Planning on a mixed cluster (Note [Device classes] in cost/cluster.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "trident/planner/estimate.h"
#include "trident/planner/planner.h"

namespace trident::planner {
namespace {

// Evaluations the hill climbing of one structure may spend.
constexpr int kImproveBudget = 300;

// Rows of a micro-batch of `rows` in proportion to `speed`, each at least 1
// (largest remainders first); empty where that is the even split, or where
// there are more devices than rows (no split: the plan is then refused).
std::vector<int> shares_by_speed(int rows, const std::vector<double>& speed) {
  const int n = static_cast<int>(speed.size());
  if (n < 2 || n > rows) return {};
  const double total = std::accumulate(speed.begin(), speed.end(), 0.0);
  std::vector<int> share(n);
  std::vector<double> ideal(n);
  int given = 0;
  for (int j = 0; j < n; ++j) {
    ideal[j] = rows * speed[j] / total;
    share[j] = std::max(1, static_cast<int>(std::floor(ideal[j])));
    given += share[j];
  }
  while (given != rows) {
    int pick = -1;
    for (int j = 0; j < n; ++j) {
      const bool can = given < rows || share[j] > 1;
      const double gap = given < rows ? ideal[j] - share[j] : share[j] - ideal[j];
      if (can && (pick < 0 || gap > (given < rows ? ideal[pick] - share[pick] : share[pick] - ideal[pick]))) pick = j;
    }
    share[pick] += given < rows ? 1 : -1;
    given += given < rows ? 1 : -1;
  }
  const bool even = rows % n == 0 && std::all_of(share.begin(), share.end(), [&](int s) { return s == rows / n; });
  return even ? std::vector<int>{} : share;
}

}  // namespace

Planner Planner::homogeneous_view(const cost::DeviceSpec& device, int count, cost::CostModel cost) const {
  cost::ClusterSpec c = cluster_;
  c.classes.clear(), c.class_of.clear(), c.host_first.clear(), c.host_links.clear(), c.node_links.clear();
  c.device = device;
  c.name = cluster_.name + " (" + device.name + ")";
  c.nodes = std::max(1, (count + c.devices_per_node - 1) / c.devices_per_node);
  PlanRequest r = request_;
  r.devices = count;
  r.placement = "auto";
  if (schedule_auto_) r.schedule.clear();
  if (!ratio_given_) r.micro_batch_ratio = 0;
  return Planner(graph_, std::move(c), std::move(cost), std::move(r));
}

std::optional<plan::Plan> Planner::repriced(plan::Plan plan) const {
  try {
    plan.devices = request_.devices;
    plan::validate_plan(plan, graph_);
    predict(plan);
    fit_memory(plan);
    return plan;
  } catch (const plan::PlanError& e) {
    if (e.kind() == ErrorKind::kFailure) throw;
    return std::nullopt;
  }
}

namespace {

// Places one structure's stages on devices (see Note [Class-aware placement]).
class Placer {
 public:
  Placer(const Planner& planner, const Planner& scheduled, const plan::Plan& structure, const std::vector<cost::CostModel>& costs)
      : planner_(planner), scheduled_(scheduled), structure_(structure) {
    const auto& g = planner.graph();
    const int classes = static_cast<int>(costs.size());
    for (const auto& st : structure.stages) {
      std::vector<graph::OpId> ops;
      for (const auto& name : st.ops) ops.push_back(g.id_of(name));
      const int rows = std::max(1, st.micro_batch / static_cast<int>(std::max<std::size_t>(1, st.devices.size())));
      tau_.emplace_back(classes);
      for (int k = 0; k < classes; ++k) {
        double t = 0;
        for (auto id : ops) t += costs[k].forward_s(g.op(id), rows) + costs[k].backward_s(g.op(id), rows);
        tau_.back()[k] = std::max(t, 1e-12) / rows;
      }
    }
  }

  int stages() const { return static_cast<int>(structure_.stages.size()); }
  double speed(int s, int d) const { return 1.0 / tau_[s][planner_.cluster().class_index(d)]; }

  // The structure on `placed` (devices by stage), shares by speed,
  // predicted; nullopt where it does not fit. Counts evaluations.
  std::optional<plan::Plan> evaluate(const std::vector<std::vector<int>>& placed) {
    ++evaluations_;
    plan::Plan p = structure_;
    p.devices = planner_.request().devices;
    p.grad_sync.clear();
    for (int s = 0; s < stages(); ++s) {
      auto& st = p.stages[s];
      st.devices = placed[s];
      std::sort(st.devices.begin(), st.devices.end());
      std::vector<double> v;
      for (int d : st.devices) v.push_back(speed(s, d));
      st.shares = shares_by_speed(st.micro_batch, v);
      st.actions.clear();
      st.recompute = planner_.request().recompute == "always";
    }
    // Every stage on at least one device and at most one per row.
    if (std::any_of(p.stages.begin(), p.stages.end(), [](const plan::PlanStage& st) {
                    return st.devices.empty() || static_cast<int>(st.devices.size()) > st.micro_batch;
        }))
      return std::nullopt;
    try {
      plan::validate_plan(p, planner_.graph());
    } catch (const plan::PlanError& e) {
      if (e.kind() == ErrorKind::kFailure) throw;
      return std::nullopt;
    }
    scheduled_.fill_sync(p);
    return scheduled_.repriced(std::move(p));
  }
  int evaluations() const { return evaluations_; }

  // Greedy: one device per stage, heaviest first, each the fastest left for
  // it; then each device left to the bottleneck stage. Every step evaluated.
  std::vector<plan::Plan> greedy() {
    const int n = planner_.request().devices;
    const auto& c = planner_.cluster();
    std::vector<std::vector<int>> placed(stages());
    std::vector<char> used(n, 0);
    auto pick = [&](int s) {
      std::vector<int> free_on(c.nodes, 0), mine(c.nodes, 0);
      for (int d = 0; d < n; ++d) free_on[c.node_of(d)] += !used[d];
      for (int d : placed[s]) ++mine[c.node_of(d)];
      int best = -1;
      auto key = [&](int d) { return std::make_tuple(speed(s, d), mine[c.node_of(d)] > 0, free_on[c.node_of(d)], -d); };
      for (int d = 0; d < n; ++d)
        if (!used[d] && (best < 0 || key(d) > key(best))) best = d;
      return best;
    };
    auto load = [&](int s) {
      double v = 0;
      for (int d : placed[s]) v += speed(s, d);
      return structure_.stages[s].micro_batch / v;
    };
    std::vector<plan::Plan> out;
    auto emit = [&] {
      if (auto p = evaluate(placed)) out.push_back(std::move(*p));
    };
    std::vector<int> order(stages());
    std::iota(order.begin(), order.end(), 0);
    auto work = [&](int s) { return structure_.stages[s].micro_batch * *std::min_element(tau_[s].begin(), tau_[s].end()); };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return work(a) > work(b); });
    for (int s : order) {
      const int d = pick(s);
      placed[s].push_back(d), used[d] = 1;
    }
    emit();
    for (int left = n - stages(); left > 0; --left) {
      int worst = -1;
      for (int s = 0; s < stages(); ++s)
        if (static_cast<int>(placed[s].size()) < structure_.stages[s].micro_batch && (worst < 0 || load(s) > load(worst)))
          worst = s;
      if (worst < 0) break;
      const int d = pick(worst);
      placed[worst].push_back(d), used[d] = 1;
      emit();
    }
    return out;
  }

  // Hill climbing from `start` (a placement of this structure): swap two
  // devices of different classes between stages, move a device to another
  // stage, take an idle one in or leave one idle; the first move more than
  // 0.1% faster is kept, until none is or `budget` evaluations are spent.
  plan::Plan improve(plan::Plan start, int budget) {
    const int n = planner_.request().devices;
    const auto& c = planner_.cluster();
    std::vector<std::vector<int>> placed;
    for (const auto& st : start.stages) placed.push_back(st.devices);
    plan::Plan best = std::move(start);
    const int limit = evaluations_ + budget;
    auto better = [&](const std::vector<std::vector<int>>& trial) {
      if (evaluations_ >= limit) return false;
      auto p = evaluate(trial);
      if (!p || p->predicted.samples_per_s <= 1.001 * best.predicted.samples_per_s) return false;
      best = std::move(*p);
      placed = trial;
      return true;
    };
    for (bool moved = true; moved && evaluations_ < limit;) {
      moved = false;
      std::vector<int> idle;
      std::vector<char> used(n, 0);
      for (const auto& ds : placed)
        for (int d : ds) used[d] = 1;
      for (int d = 0; d < n; ++d)
        if (!used[d]) idle.push_back(d);
      for (int s = 0; s < stages() && !moved; ++s)
        for (std::size_t i = 0; i < placed[s].size() && !moved; ++i) {
          const int a = placed[s][i];
          for (int t = 0; t < stages() && !moved; ++t) {
            if (t == s) continue;
            for (std::size_t j = 0; j < placed[t].size() && !moved; ++j) {
              const int b = placed[t][j];
              if (c.class_index(a) == c.class_index(b)) continue;
              auto trial = placed;
              trial[s][i] = b, trial[t][j] = a;
              moved = better(trial);
            }
            if (!moved && placed[s].size() > 1) {
              auto trial = placed;
              trial[s].erase(trial[s].begin() + static_cast<std::ptrdiff_t>(i));
              trial[t].push_back(a);
              moved = better(trial);
            }
          }
          if (!moved && placed[s].size() > 1) {
            auto trial = placed;
            trial[s].erase(trial[s].begin() + static_cast<std::ptrdiff_t>(i));
            moved = better(trial);
          }
        }
      for (int s = 0; s < stages() && !moved; ++s)
        for (int d : idle) {
          auto trial = placed;
          trial[s].push_back(d);
          if ((moved = better(trial))) break;
        }
    }
    return best;
  }

 private:
  const Planner& planner_;
  const Planner& scheduled_;
  const plan::Plan& structure_;
  std::vector<std::vector<double>> tau_;  // [stage][class]: seconds per row on one device
  int evaluations_ = 0;
};

}  // namespace

std::vector<plan::Plan> Planner::place_on_classes(const plan::Plan& structure) const {
  Planner scheduled = *this;  // the structure's schedule, so that sync methods fit it (fill_sync)
  scheduled.request_.schedule = structure.schedule;
  Placer placer(*this, scheduled, structure, class_costs_);
  if (placer.stages() > request_.devices) return {};
  auto out = placer.greedy();
  // The structure's own devices (where it was planned on this cluster's ids), shares by speed.
  std::vector<std::vector<int>> given;
  bool ours = true;
  for (const auto& st : structure.stages) {
    given.push_back(st.devices);
    for (int d : st.devices) ours &= d < request_.devices;
  }
  if (ours)
    if (auto p = placer.evaluate(given)) out.push_back(std::move(*p));
  std::stable_sort(out.begin(), out.end(),
                   [](const plan::Plan& a, const plan::Plan& b) { return a.predicted.samples_per_s > b.predicted.samples_per_s; });
  if (!out.empty()) out.insert(out.begin(), placer.improve(out.front(), kImproveBudget));
  return out;
}

plan::Plan Planner::plan_mixed() const {
  const auto start = std::chrono::steady_clock::now();
  const int n = request_.devices;
  std::optional<plan::Plan> best;
  std::vector<plan::Plan> structures;
  std::vector<std::string> reasons;
  std::map<std::string, plan::Prediction> kinds;
  const auto& wanted = request_.placement;
  auto keep = [&](const std::string& kind, const plan::Plan& p) {
    auto& k = kinds[kind];
    if (p.predicted.samples_per_s > k.samples_per_s) k = p.predicted;
    if (wanted != "auto" && wanted != kind) return;
    if (!best || p.predicted.samples_per_s > best->predicted.samples_per_s) best = p;
  };
  auto search = [&](const Planner& view) -> std::optional<plan::Plan> {
    try {
      return view.plan();
    } catch (const plan::PlanError& e) {
      if (e.kind() == ErrorKind::kFailure) throw;
      reasons.push_back(e.message());
      return std::nullopt;
    }
  };
  const auto average = cluster_.average_device(n);
  if (auto p = search(homogeneous_view(average, n, cost::class_cost_model(cost_, cluster_.device, average)))) {
    structures.push_back(*p);
    if (auto r = repriced(*p)) keep("as-average", *r);
  }
  for (int k = 0; k < static_cast<int>(cluster_.classes.size()); ++k) {
    std::vector<int> ids;
    for (int d = 0; d < n; ++d)
      if (cluster_.class_index(d) == k) ids.push_back(d);
    if (ids.empty()) continue;
    auto p = search(homogeneous_view(cluster_.classes[k], static_cast<int>(ids.size()), class_costs_[k]));
    if (!p) continue;
    for (auto& st : p->stages)
      for (auto& d : st.devices) d = ids[static_cast<std::size_t>(d)];
    structures.push_back(*p);
    if (auto r = repriced(*p)) keep("one-class", *r);
  }
  // Structures balanced for unequal speeds: the cluster as the devices'
  // combined speed in devices of the slowest class (HetPipe's virtual
  // workers), so that a stage's replica count reflects its share of the
  // work; placement maps them back to real devices.
  int slowest = cluster_.class_index(0);  // among the request's devices
  double total = 0;
  for (int d = 0; d < n; ++d)
    if (cluster_.device_at(d).peak(graph::DType::kFloat32) < cluster_.classes[slowest].peak(graph::DType::kFloat32))
      slowest = cluster_.class_index(d);
  for (int d = 0; d < n; ++d)
    total += cluster_.device_at(d).peak(graph::DType::kFloat32) / cluster_.classes[slowest].peak(graph::DType::kFloat32);
  const int virtual_devices = std::min(4 * n, static_cast<int>(std::lround(total)));
  if (virtual_devices > n)
    if (auto p = search(homogeneous_view(cluster_.classes[slowest], virtual_devices, class_costs_[slowest]))) structures.push_back(*p);
  for (const auto& s : structures) {
    const auto placed = place_on_classes(s);
    if (!placed.empty()) keep("class-aware", placed.front());
  }
  if (!best) no_plan(reasons, request_.micro_batch.value_or(request_.mini_batch));
  best->placement_best = std::move(kinds);
  best->search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stamp(*best);
  return *best;
}

}  // namespace trident::planner
