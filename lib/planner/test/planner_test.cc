// The planner's behaviour on zoo models: what it picks, what it reports,
// what it refuses, how recomputation and scale change it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "test_graphs.h"
#include "trident/planner/planner.h"

namespace trident::planner {
namespace {

using testing::model;
using testing::planner;

TEST(Planner, AssembleRejectsStagesThatFormACycle) {
  const auto& g = model("mlp", "tiny");
  const auto topo = g.topo_order();
  // The first and last ops in one stage, everything between in another: not convex.
  std::vector<Planner::StageChoice> stages(2);
  for (std::size_t i = 0; i < topo.size(); ++i)
    stages[i == 0 || i + 1 == topo.size() ? 0 : 1].ops.push_back(topo[i]);
  stages[0].replicas = stages[1].replicas = 1;
  try {
    planner(g, "cpu-local", 2, 8, "graphpipe").assemble(stages, 8, "hand-written");
    FAIL() << "no error";
  } catch (const plan::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("form a cycle"), std::string::npos) << e.what();
  }
}

TEST(Planner, GraphPipeRunsBranchesSideBySideAndBeatsTheSequentialBaseline) {
  const auto& g = model("candle_uno", "paper");
  const auto t0 = std::chrono::steady_clock::now();
  auto gpp = planner(g, "summit-v100", 8, 128, "graphpipe", std::nullopt, "graph-1f1b").plan();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto spp = planner(g, "summit-v100", 8, 128, "pipedream", std::nullopt, "1f1b").plan();
  EXPECT_NO_THROW(plan::validate_plan(gpp, g));
  EXPECT_LT(gpp.predicted.depth, static_cast<int>(gpp.stages.size()));  // stages side by side
  EXPECT_GT(gpp.predicted.samples_per_s, spp.predicted.samples_per_s);
  EXPECT_EQ(gpp.schedule, "graph-1f1b");
  EXPECT_EQ(spp.schedule, "1f1b");
  int used = 0;
  for (const auto& s : gpp.stages) {
    used += static_cast<int>(s.devices.size());
    EXPECT_LE(s.memory_bytes, 16.0 * (1 << 30));
    EXPECT_EQ(s.micro_batch % static_cast<int>(s.devices.size()), 0);
  }
  EXPECT_LE(used, 8);
  // The search time is measured: within the call's own wall time.
  EXPECT_GT(gpp.search_seconds, 0);
  EXPECT_LE(gpp.search_seconds, wall);
}

// See Note [Search spaces], reported: graphpipe says the best of each space it
// searched and which one its plan came from; the plan is the better of the two.
TEST(Planner, GraphPipeReportsTheBestOfEachSearchSpace) {
  const auto& g = model("mmt", "paper");
  const auto p = planner(g, "summit-v100", 32, 512, "graphpipe").plan();
  ASSERT_EQ(p.space_best.size(), 2u);
  const auto& sp = p.space_best.at("series-parallel");
  const auto& seq = p.space_best.at("sequential");
  EXPECT_DOUBLE_EQ(p.predicted.samples_per_s, std::max(sp.samples_per_s, seq.samples_per_s));
  EXPECT_DOUBLE_EQ(p.space_best.at(p.space).samples_per_s, p.predicted.samples_per_s);
  const auto back = plan::Plan::from_json(nlohmann::json::parse(p.to_json().dump()), "mem");
  EXPECT_EQ(back.space, p.space);
  EXPECT_DOUBLE_EQ(back.space_best.at("sequential").samples_per_s, seq.samples_per_s);
  // pipedream searches the sequential space alone.
  const auto pd = planner(g, "summit-v100", 32, 512, "pipedream").plan();
  EXPECT_EQ(pd.space, "sequential");
  EXPECT_EQ(pd.space_best.size(), 1u);
}

TEST(Planner, OnAChainGraphPipeAndPipeDreamPredictTheSameThroughput) {
  for (const char* name : {"mlp", "transformer", "cnn"}) {
    const auto& g = model(name, "paper");
    ASSERT_EQ(graph::to_string(graph::sp_decompose(g, true).root), graph::to_string(graph::linearize(g, true).root))
        << name << " is not a chain";
    for (int devices : {2, 4, 8}) {
      auto gpp = planner(g, "summit-v100", devices, 64, "graphpipe", 8, "graph-1f1b").plan();
      auto spp = planner(g, "summit-v100", devices, 64, "pipedream", 8, "1f1b").plan();
      EXPECT_DOUBLE_EQ(gpp.predicted.samples_per_s, spp.predicted.samples_per_s) << name << " " << devices;
    }
  }
}

TEST(Planner, DataParallelIsOneStageOverEveryDeviceOrAPowerOfTwo) {
  const auto& g = model("mlp", "tiny");
  auto p = planner(g, "cpu-local", 6, 64, "dp").plan();
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].devices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(p.stages[0].ops.size(), static_cast<std::size_t>(g.size()));
  EXPECT_FALSE(p.grad_sync.empty());  // every parameter gets a method
  for (const auto& [name, method] : p.grad_sync) EXPECT_TRUE(method == "allreduce" || method == "ps" || method == "sfb");
  // Every device where the batch splits evenly among them (as trident train runs dp).
  EXPECT_EQ(planner(g, "cpu-local", 3, 48, "dp", 48).plan().stages[0].devices, (std::vector<int>{0, 1, 2}));
}

// See Note [Sharded parameter server]: a PS-synced parameter's optimizer state is
// 1/r per replica, all-reduce keeps a buffer per bucket, and the memory model
// counts both — a model whose state
// does not fit every replica whole trains data parallel under the PS.
TEST(Planner, ParameterServerShardsOptimizerStateInTheMemoryModel) {
  const auto& g = model("mlp", "paper");
  double params = 0;
  for (const auto& op : g.ops()) params += static_cast<double>(op.param_bytes());
  auto with = [&](const std::string& sync, std::optional<double> cap) {
    auto c = cost::load_cluster("cpu-local");
    PlanRequest r;
    r.devices = 4, r.mini_batch = 64, r.partitioner = "dp", r.grad_sync = sync, r.device_memory_bytes = cap;
    return Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  };
  const auto ar = with("allreduce", std::nullopt), ps = with("ps", std::nullopt);
  ASSERT_EQ(ps.stages.size(), 1u);
  EXPECT_EQ(ps.stages[0].devices.size(), 4u);
  // Adam: two states per parameter, 3/4 of them elsewhere under the PS; and
  // all-reduce's bucket buffers, as large as the gradients, which the PS's
  // bounded pieces do not need (see Note [PS pieces]).
  EXPECT_NEAR(ar.stages[0].memory_bytes - ps.stages[0].memory_bytes, params * (2 * 0.75 + 1), 1e-6 * params);
  EXPECT_DOUBLE_EQ(ps.stages[0].param_bytes, params);
  const double cap = (ar.stages[0].memory_bytes + ps.stages[0].memory_bytes) / 2;
  EXPECT_THROW(with("allreduce", cap), plan::PlanError);
  EXPECT_EQ(with("ps", cap).stages[0].devices.size(), 4u);
}

// See Note [Precision policy]: under bf16 a product's activations are kept in
// bf16 and each in-flight micro-batch holds a bf16 copy of its weights;
// what a pipeline's edges move is priced in the computed dtype; the plan
// says which precision it was made for, also when read back.
TEST(Planner, Bf16HalvesProductActivationsAddsWeightCopiesAndRecordsItself) {
  const auto& g = model("mlp", "paper");
  auto with = [&](graph::Precision precision, int devices) {
    auto c = cost::load_cluster("cpu-local");
    PlanRequest r;
    r.devices = devices, r.mini_batch = 64, r.micro_batch = 64, r.partitioner = devices == 1 ? "dp" : "pipedream";
    r.max_replicas = 1, r.precision = precision;
    return Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  };
  const auto fp32 = with(graph::Precision::kFp32, 1), bf16 = with(graph::Precision::kBf16, 1);
  // Per row: everything kept, and what is kept of ops computed in bf16 (the
  // products and what follows them); the products' weights.
  const auto dtypes = graph::computed_dtypes(g, graph::Precision::kBf16);
  double kept = 0, in_bf16 = 0, params = 0;
  for (graph::OpId id = 0; id < g.size(); ++id) {
    const auto& op = g.op(id);
    kept += static_cast<double>(op.activation_bytes);
    if (dtypes[id] == graph::DType::kBFloat16) in_bf16 += static_cast<double>(op.activation_bytes);
    if (graph::op_precision(op.kind) == graph::OpPrecision::kLow) params += static_cast<double>(op.param_bytes());
  }
  ASSERT_GT(in_bf16, 0);
  EXPECT_DOUBLE_EQ(fp32.stages[0].activation_bytes, kept * 64);
  EXPECT_NEAR(bf16.stages[0].activation_bytes, (kept - in_bf16 / 2) * 64 + params / 2, 1e-9 * kept * 64);
  EXPECT_EQ(bf16.precision, "bf16");
  EXPECT_EQ(fp32.to_json().count("precision"), 0u);  // fp32 plans read as they always did
  EXPECT_EQ(plan::Plan::from_json(bf16.to_json(), "test").precision, "bf16");
  // PS pushes in bf16 (parallel.comm_dtype) are recorded too, so a saved plan
  // is priced again as it was made; a dtype that does not exist is refused.
  EXPECT_EQ(fp32.to_json().count("comm_dtype"), 0u);
  auto c = cost::load_cluster("cpu-local");
  PlanRequest r;
  r.devices = 1, r.mini_batch = 64, r.partitioner = "dp", r.ps_push_scale = 0.5;
  const auto pushed = Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  EXPECT_EQ(pushed.comm_dtype, "bf16");
  EXPECT_EQ(plan::Plan::from_json(pushed.to_json(), "test").comm_dtype, "bf16");
  auto odd = pushed.to_json();
  odd["comm_dtype"] = "fp16";
  EXPECT_THROW(plan::Plan::from_json(odd, "test"), plan::PlanError);
  // A pipeline: its edges move bf16, so the modelled iteration is no slower.
  EXPECT_LE(with(graph::Precision::kBf16, 2).predicted.iteration_s, with(graph::Precision::kFp32, 2).predicted.iteration_s);
}

// See Note [Server copy]: under staleness every server also holds a copy of its
// 1/r of the PS-synced weights; the memory model counts it.
TEST(Planner, StalenessCountsTheServersCopyOfTheirBlocks) {
  const auto& g = model("mlp", "paper");
  double params = 0;
  for (const auto& op : g.ops()) params += static_cast<double>(op.param_bytes());
  auto with = [&](const std::string& sync, int staleness) {
    auto c = cost::load_cluster("cpu-local");
    PlanRequest r;
    r.devices = 4, r.mini_batch = 64, r.partitioner = "dp", r.grad_sync = sync, r.staleness = staleness;
    return Planner(g, c, cost::analytic_cost_model(c.device), r).plan().stages.at(0).memory_bytes;
  };
  EXPECT_NEAR(with("ps", 2) - with("ps", 0), params / 4, 1e-6 * params);
  EXPECT_DOUBLE_EQ(with("allreduce", 2), with("allreduce", 0));
}

TEST(Planner, NoFeasiblePlanNamesWhatDoesNotFit) {
  const auto& g = model("mmt", "paper");
  auto c = cost::load_cluster("summit-v100");
  PlanRequest r;
  r.devices = 1, r.mini_batch = 8, r.device_memory_bytes = 0.05 * (1 << 30);
  try {
    Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
    FAIL();
  } catch (const plan::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no feasible plan: op '"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0.05 GiB of a V100"), std::string::npos) << e.what();
  }
  r.device_memory_bytes = 2.0 * (1 << 30);  // every op fits alone, the model does not
  try {
    Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
    FAIL();
  } catch (const plan::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("no feasible plan"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1 devices of 2.00 GiB"), std::string::npos) << e.what();
  }
  r.devices = 0;
  EXPECT_THROW(Planner(g, c, cost::analytic_cost_model(c.device), r), plan::PlanError);
  r.devices = 2, r.micro_batch = 3;
  EXPECT_THROW(Planner(g, c, cost::analytic_cost_model(c.device), r), plan::PlanError);
}

// A model whose activations do not fit: never finds no plan; auto finds one
// whose recomputing stages hold static + one forward's activations +
// in-flight x inputs, and take one more forward in backward; always
// recomputes every stage.
TEST(Planner, RecomputationFitsPlansThatDoNotFitOtherwise) {
  const auto& g = model("transformer", "tiny");
  auto with = [&](const std::string& rule, double cap) {
    auto c = cost::load_cluster("summit-v100");
    PlanRequest r;
    r.devices = 4, r.mini_batch = 64, r.micro_batch = 8, r.partitioner = "pipedream", r.recompute = rule;
    r.max_replicas = 1;
    r.device_memory_bytes = cap;
    return Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  };
  const auto roomy = with("never", 64.0 * (1 << 30));
  const auto always = with("always", 64.0 * (1 << 30));
  double plain_peak = 0;
  for (const auto& st : roomy.stages) plain_peak = std::max(plain_peak, st.memory_bytes);
  for (std::size_t i = 0; i < always.stages.size(); ++i) EXPECT_TRUE(always.stages[i].recompute);
  EXPECT_FALSE(std::any_of(roomy.stages.begin(), roomy.stages.end(), [](auto& st) { return st.recompute; }));
  if (always.stages.size() == roomy.stages.size() && always.stages[0].ops == roomy.stages[0].ops) {
    const auto& a = always.stages[0];
    const auto& n = roomy.stages[0];
    EXPECT_NEAR(a.backward_s, n.backward_s + n.forward_s, 1e-12);
    EXPECT_NEAR(a.memory_bytes, n.memory_bytes - n.in_flight * n.activation_bytes + n.activation_bytes +
                                    a.in_flight * a.activation_bytes, 1e-6 * n.memory_bytes);
    EXPECT_LT(a.activation_bytes, n.activation_bytes);  // kept inputs, not activations
  }
  // The largest cap (in steps of 10%) at which no plan fits without recomputing.
  double cap = plain_peak;
  for (int i = 0; i < 40; ++i, cap *= 0.9) {
    try {
      with("never", cap);
    } catch (const plan::PlanError&) {
      break;
    }
  }
  EXPECT_THROW(with("never", cap), plan::PlanError);
  const auto fit = with("auto", cap);
  int recomputing = 0;
  for (const auto& st : fit.stages) {
    EXPECT_LE(st.memory_bytes, cap);
    recomputing += st.recompute;
  }
  EXPECT_GT(recomputing, 0);
}

// Sanitizers slow the search about 7x (5.4 s under ASan and UBSan at -O1).
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 10;
#else
constexpr double kSanitizerSlowdown = 1;
#endif

// Issue 11: the search scales (see Note [Devices for a depth]). A paper-size
// branchy model on 256 devices at 16 samples each plans in seconds (0.65 s
// on the development machine with one micro-batch size per plan, 18 s
// before the table was indexed by depth; 1.4-1.6 s one size and 2.2-2.8 s
// with per-stage sizes on the 2026-12-03 machine, 5.5 s under make test's
// load), and uses them: its pick is no slower than data parallelism on all
// 256. The bound guards against a search that blows up, not a speed target
// (bench/run_search_time.sh measures that).
TEST(Planner, PlansTwoHundredFiftySixDevicesInSeconds) {
  const auto& g = model("mmt", "paper");
  const auto plan = planner(g, "summit-v100", 256, 16 * 256, "graphpipe").plan();
  EXPECT_LT(plan.search_seconds, 15.0 * kSanitizerSlowdown);
  const auto dp = planner(g, "summit-v100", 256, 16 * 256, "dp").plan();
  EXPECT_GE(plan.predicted.samples_per_s, dp.predicted.samples_per_s * (1 - 1e-9));
  int used = 0;
  for (const auto& st : plan.stages) used += static_cast<int>(st.devices.size());
  EXPECT_LE(used, 256);
  EXPECT_GT(used, 128);
}

// Note [Weight pass]: a zero-bubble schedule changes when
// the weight gradients are computed, not their price. Each stage costs what
// it costs under graph-1f1b, W is its weight products (all of a source
// stage's backward, which has no input gradients), and B the rest.
TEST(Planner, ASplitBackwardIsPricedAsTheRuntimeRunsIt) {
  const auto& g = model("candle_uno", "tiny");
  auto base = planner(g, "cpu-local", 4, 64, "graphpipe", 16);
  const auto plan = base.plan();
  auto split = plan;
  split.schedule = "graph-zb";
  const auto whole = base.stage_graph(plan), parts = base.stage_graph(split);
  ASSERT_EQ(whole.stages.size(), parts.stages.size());
  int sources = 0, joins = 0;
  for (std::size_t s = 0; s < parts.stages.size(); ++s) {
    SCOPED_TRACE("stage " + std::to_string(s));
    const auto &a = whole.stages[s], &b = parts.stages[s];
    EXPECT_DOUBLE_EQ(a.forward_s, b.forward_s);
    EXPECT_DOUBLE_EQ(a.backward_s, b.backward_s);
    EXPECT_DOUBLE_EQ(a.weight_s, b.weight_s);
    const bool source = std::none_of(plan.edges.begin(), plan.edges.end(), [&](const auto& e) { return e.to == static_cast<int>(s); });
    if (source) {
      ++sources;
      EXPECT_DOUBLE_EQ(b.weight_s, b.backward_s);
    } else {
      ++joins;
      EXPECT_GT(b.weight_s, 0);
      EXPECT_LT(b.weight_s, b.backward_s);
    }
  }
  EXPECT_GT(sources, 0);
  EXPECT_GT(joins, 0);
}

// Note [Automatic schedule]: under auto the partitioner's base schedule
// ranks the partitions; then the zero-bubble schedules are simulated on the
// chosen stages and one replaces the base only when more than 1% faster.
TEST(Planner, AutoKeepsTheBaseScheduleUnlessAZeroBubbleOneIsFaster) {
  int switched = 0, kept = 0;
  for (const auto& [name, partitioner] : std::vector<std::pair<std::string, std::string>>{
           {"candle_uno", "graphpipe"}, {"mmt", "graphpipe"}, {"transformer", "pipedream"}, {"mlp", "pipedream"}}) {
    for (int devices : {4, 8}) {
      SCOPED_TRACE(name + " on " + std::to_string(devices) + " devices, " + partitioner);
      const auto& g = model(name, "paper");
      const auto p = planner(g, "summit-v100", devices, 128, partitioner).plan();
      const std::string base = partitioner == "graphpipe" ? "graph-1f1b" : "1f1b";
      const auto pinned = planner(g, "summit-v100", devices, 128, partitioner, std::nullopt, base).plan();
      EXPECT_TRUE(pinned.schedule_best.empty());  // a named schedule is not second-guessed
      if (p.stages.size() < 2) continue;
      const auto expected = partitioner == "graphpipe" ? std::vector<std::string>{"graph-1f1b", "graph-zb"}
                                                       : std::vector<std::string>{"1f1b", "zb-h1", "zb-h2"};
      for (const auto& s : expected) EXPECT_TRUE(p.schedule_best.count(s)) << s << " was not simulated";
      ASSERT_TRUE(p.schedule_best.count(p.schedule));
      const auto back = plan::Plan::from_json(p.to_json(), "mem");  // the plan file keeps them
      ASSERT_EQ(back.schedule_best.size(), p.schedule_best.size());
      for (const auto& [s, pr] : p.schedule_best) {
        EXPECT_DOUBLE_EQ(back.schedule_best.at(s).samples_per_s, pr.samples_per_s);
        EXPECT_DOUBLE_EQ(back.schedule_best.at(s).bubble_fraction, pr.bubble_fraction);
      }
      EXPECT_DOUBLE_EQ(p.schedule_best.at(base).samples_per_s, pinned.predicted.samples_per_s);
      EXPECT_DOUBLE_EQ(p.schedule_best.at(p.schedule).samples_per_s, p.predicted.samples_per_s);
      double fastest = 0;
      for (const auto& [s, pr] : p.schedule_best) fastest = std::max(fastest, pr.samples_per_s);
      if (p.schedule == base) {
        ++kept;
        EXPECT_LE(fastest, 1.01 * pinned.predicted.samples_per_s);
      } else {
        ++switched;
        EXPECT_DOUBLE_EQ(p.predicted.samples_per_s, fastest);
        EXPECT_GT(p.predicted.samples_per_s, 1.01 * pinned.predicted.samples_per_s);
      }
    }
  }
  EXPECT_GT(switched, 0);
}

}  // namespace
}  // namespace trident::planner
