// Planning on mixed clusters (Note [Class-aware placement] in planner/planner.h):
// the plan is never slower than the two baselines, each rebuilt here
// independently of the planner's own search (hosts of equal and of unequal
// sizes); heavy branches go to fast devices; shares follow speed.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_graphs.h"
#include "trident/planner/planner.h"

namespace trident::planner {
namespace {

// The two classes of the clusters below: slow (8 TFLOP/s) and fast (30).
constexpr const char* kClasses = R"(classes:
  - {name: slow, float32_tflops: 8, memory_gib: 16, memory_bandwidth_gbs: 900, half_efficiency_gflop: 1, launch_us: 10}
  - {name: fast, float32_tflops: 30, memory_gib: 80, memory_bandwidth_gbs: 2000, half_efficiency_gflop: 2, launch_us: 8}
)";

// Two hosts of 4: host 0 holds 2 slow and 2 fast devices, host 1 four slow.
cost::ClusterSpec small_mixed() {
  return cost::parse_cluster(std::string(kClasses) + R"(name: small-mixed
hosts:
  - {devices: {slow: 2, fast: 2}, link: {latency_us: 5, bandwidth_gbs: 100}}
  - {devices: {slow: 4}, link: {latency_us: 5, bandwidth_gbs: 50}}
links:
  - {from: 0, to: 1, latency_us: 10, bandwidth_gbs: 12.5}
)",
                             "small-mixed");
}

// Hosts of different sizes: 3 fast devices on one, 2 slow on another.
cost::ClusterSpec uneven_hosts() {
  return cost::parse_cluster(std::string(kClasses) + R"(name: uneven-hosts
hosts:
  - {devices: {fast: 3}, link: {latency_us: 5, bandwidth_gbs: 100}}
  - {devices: {slow: 2}, link: {latency_us: 5, bandwidth_gbs: 50}}
inter_node: {latency_us: 10, bandwidth_gbs: 12.5}
)",
                             "uneven-hosts");
}

PlanRequest request(const graph::OpGraph& g, int devices, int mini, const std::string& partitioner) {
  PlanRequest r;
  r.model = g.name(), r.preset = "?", r.devices = devices, r.mini_batch = mini, r.partitioner = partitioner;
  return r;
}

// The cluster as a class-unaware planner sees it: `device` on `count` devices.
cost::ClusterSpec one_kind(const cost::ClusterSpec& c, const cost::DeviceSpec& device, int count) {
  auto h = c;
  h.classes.clear(), h.class_of.clear(), h.host_first.clear(), h.host_links.clear(), h.node_links.clear();
  h.device = device;
  h.nodes = (count + h.devices_per_node - 1) / h.devices_per_node;
  return h;
}

// The baselines of the issue, each planned by a homogeneous planner and
// predicted on the mixed cluster: every device taken as the average one,
// and each class alone.
std::map<std::string, double> baselines(const graph::OpGraph& g, const cost::ClusterSpec& c, const PlanRequest& r) {
  std::map<std::string, double> out;
  const Planner mixed(g, c, cost::analytic_cost_model(c.device), r);
  const auto avg = c.average_device(r.devices);
  try {
    auto p = Planner(g, one_kind(c, avg, r.devices), cost::analytic_cost_model(avg), r).plan();
    if (auto q = mixed.repriced(p)) out["as-average"] = q->predicted.samples_per_s;
  } catch (const plan::PlanError&) {
  }
  for (int k = 0; k < static_cast<int>(c.classes.size()); ++k) {
    std::vector<int> ids;
    for (int d = 0; d < r.devices; ++d)
      if (c.class_index(d) == k) ids.push_back(d);
    if (ids.empty()) continue;
    auto rk = r;
    rk.devices = static_cast<int>(ids.size());
    try {
      auto p = Planner(g, one_kind(c, c.classes[k], rk.devices), cost::analytic_cost_model(c.classes[k]), rk).plan();
      for (auto& st : p.stages)
        for (auto& d : st.devices) d = ids[static_cast<std::size_t>(d)];
      if (auto q = mixed.repriced(p)) out["class " + c.classes[k].name] = q->predicted.samples_per_s;
    } catch (const plan::PlanError&) {
    }
  }
  return out;
}

TEST(MixedPlanner, NeverSlowerThanEitherBaselineOnGeneratedDags) {
  int beaten = 0, cases = 0;
  for (unsigned seed = 0; seed < 10; ++seed) {
    std::mt19937 rng(seed);
    const auto g = seed % 2 ? testing::random_model(rng, 14) : testing::random_sp_model(rng, 14);
    for (int devices : {4, 8, 5}) {
      const auto c = devices == 5 ? uneven_hosts() : small_mixed();
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(devices) + " devices of " + c.name);
      const auto r = request(g, devices, 64, "graphpipe");
      auto p = Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
      plan::validate_plan(p, g);
      EXPECT_EQ(p.placement_best.count("class-aware"), 1u);
      double best_baseline = 0;
      for (const auto& [name, samples] : baselines(g, c, r)) {
        EXPECT_GE(p.predicted.samples_per_s, samples * (1 - 1e-9)) << name;
        best_baseline = std::max(best_baseline, samples);
      }
      ++cases;
      beaten += p.predicted.samples_per_s > 1.01 * best_baseline;
    }
  }
  // Not only a pick among the baselines: placement by class wins outright on some.
  EXPECT_GE(beaten, cases / 4) << beaten << " of " << cases;
}

TEST(MixedPlanner, PresetPlansValidateAndPlaceByClass) {
  for (const auto& [cluster, name] : {std::pair{"mixed-v100-a100", "candle_uno"}, {"mixed-h200-a100", "dlrm"}}) {
    SCOPED_TRACE(std::string(cluster) + " " + name);
    const auto c = cost::load_cluster(cluster);
    const auto& g = testing::model(name, "paper");
    const auto r = request(g, 16, 256, "graphpipe");
    auto p = Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
    plan::validate_plan(p, g);
    for (const auto& [base, samples] : baselines(g, c, r)) EXPECT_GE(p.predicted.samples_per_s, samples * (1 - 1e-9)) << base;
    EXPECT_GT(p.predicted.samples_per_s, 1.01 * p.placement_best.at("as-average").samples_per_s);
  }
}

// Two branches of unequal work: a heavy one (4096 wide) and a light one.
graph::OpGraph two_branches() {
  zoo::GraphBuilder b("branches");
  const auto x = b.input("x", {{512}, graph::DType::kFloat32});
  auto heavy = b.linear("heavy.0", x, 4096);
  heavy = b.linear("heavy.1", heavy, 4096);
  heavy = b.linear("heavy.2", heavy, 64);
  auto light = b.linear("light.0", x, 1024);
  light = b.linear("light.1", light, 256);
  light = b.linear("light.2", light, 64);
  const auto join = b.concat("join", {heavy, light}, 0);
  b.cross_entropy("loss", b.linear("head", join, 8), b.input("label", {{}, graph::DType::kInt64}, 8));
  return b.finish();
}

// A heavy branch and a light one on one fast and one slow device: the heavy
// branch's stage runs on the fast device, whichever device id it has.
TEST(MixedPlanner, HeavyBranchGoesToTheFastDevice) {
  const auto g = two_branches();
  auto c = small_mixed();
  for (const auto& order : {std::vector<int>{0, 1}, std::vector<int>{1, 0}}) {  // slow first, then fast first
    c.class_of = {order[0], order[1], 0, 0, 0, 0, 0, 0};
    auto r = request(g, 2, 2048, "graphpipe");
    r.micro_batch = 64, r.max_replicas = 1;
    auto p = Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
    ASSERT_EQ(p.stages.size(), 2u) << p.to_json().dump();
    for (const auto& st : p.stages) {
      const bool has_heavy = std::find(st.ops.begin(), st.ops.end(), "heavy.1") != st.ops.end();
      EXPECT_EQ(c.device_at(st.devices.at(0)).name, has_heavy ? "fast" : "slow") << "stage " << st.id;
    }
  }
}

// dp on one fast and one slow device: one stage whose shares follow speed.
TEST(MixedPlanner, DataParallelSharesFollowSpeed) {
  const auto g = two_branches();
  auto c = small_mixed();
  c.class_of = {1, 0, 0, 0, 0, 0, 0, 0};
  auto r = request(g, 2, 4096, "dp");
  r.micro_batch = 4096;
  auto p = Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  ASSERT_EQ(p.stages.size(), 1u);
  ASSERT_EQ(p.stages[0].devices, (std::vector<int>{0, 1}));
  ASSERT_EQ(p.stages[0].shares.size(), 2u);
  EXPECT_GT(p.stages[0].shares[0], 2 * p.stages[0].shares[1]);  // 30 against 8 TFLOP/s
  EXPECT_EQ(p.stages[0].shares[0] + p.stages[0].shares[1], 4096);
}

// See Note [Class-aware placement]: a placed stage keeps each replica's own
// compute (what an emulated replica waits) and takes the slowest's.
TEST(MixedPlanner, PlacedStagesPriceEachReplicaAndTakeTheSlowest) {
  const auto g = two_branches();
  auto c = small_mixed();
  c.class_of = {1, 0, 0, 0, 0, 0, 0, 0};  // device 0 fast, device 1 slow
  auto r = request(g, 2, 4096, "dp");
  r.micro_batch = 4096;
  const Planner planner(g, c, cost::analytic_cost_model(c.device), r);
  auto p = planner.plan();
  ASSERT_EQ(p.stages[0].shares.size(), 2u);
  auto even = p;
  even.stages[0].shares.clear();
  for (const auto& [plan, name] : {std::pair{&p, "by speed"}, {&even, "even"}}) {
    SCOPED_TRACE(name);
    const auto sg = planner.stage_graph(*plan);
    const auto& st = sg.stages.at(0);
    ASSERT_EQ(st.per_replica.size(), 2u);
    EXPECT_DOUBLE_EQ(st.forward_s + st.backward_s,
                     std::max(st.per_replica[0].forward_s + st.per_replica[0].backward_s,
                              st.per_replica[1].forward_s + st.per_replica[1].backward_s));
  }
  const auto at_even = planner.stage_graph(even).stages[0];
  EXPECT_LT(2 * at_even.per_replica[0].forward_s, at_even.per_replica[1].forward_s);  // same rows, 3.75x the speed
  const auto by_speed = planner.stage_graph(p).stages[0];
  EXPECT_LT(by_speed.forward_s + by_speed.backward_s, at_even.forward_s + at_even.backward_s);
}

}  // namespace
}  // namespace trident::planner
