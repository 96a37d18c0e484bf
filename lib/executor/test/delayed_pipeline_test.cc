// Delayed pipelines (PipeDream-2BW; Note [Delayed pipelines] in
// schedule/delayed.h) equal the one-process delayed reference — W(t+1) =
// W(t) − η∇f(W(t−1)), written out in the harness on plain copies — on the
// stage DAGs of the synchronous equality tests: graphpipe and pipedream
// plans of every zoo DAG model, a fork and a join, stages of different
// widths, stages with their own micro-batch sizes, recomputing stages, and
// replicated stages synced by all-reduce, the parameter server and SFB.
// Each stage held at most two weight versions (Note [Weight versions]).
#include "pipeline_harness.h"

namespace trident::executor {
namespace {

using namespace test;  // NOLINT: the harness

constexpr int kSteps = 4;

plan::Plan delayed(plan::Plan p, const graph::OpGraph& g) {
  p.pipeline_delay = 1;
  plan::validate_plan(p, g);
  return p;
}

void expect_delayed_equal(const graph::OpGraph& g, const plan::Plan& p) {
  SCOPED_TRACE(p.model + " " + p.partitioner + " " + p.schedule + " " + report::micro_batch_summary(p));
  const auto res = train(g, p, kSteps);
  expect_equal(res, p);
  for (std::size_t r = 0; r < res.versions.size(); ++r) EXPECT_LE(res.versions[r], 2) << "rank " << r;
  // A stage that forwards the next mini-batch early holds both versions at once.
  EXPECT_EQ(*std::max_element(res.versions.begin(), res.versions.end()), 2);
}

class Delayed : public ::testing::TestWithParam<std::string> {};

TEST_P(Delayed, GraphpipeAndPipedreamPlansEqualTheDelayedReference) {
  const auto g = zoo::build_graph({GetParam(), "tiny"});
  expect_delayed_equal(g, delayed(make_plan(g, request("graphpipe", "graph-1f1b", 4, 16, 4, 1)), g));
  expect_delayed_equal(g, delayed(make_plan(g, request("pipedream", "1f1b", 4, 16, 4, 1)), g));
}

INSTANTIATE_TEST_SUITE_P(Models, Delayed, ::testing::Values("mmt", "dlrm", "candle_uno", "inception"));

TEST(DelayedPipeline, ForkJoinWidthsSizesAndRecomputationEqualTheDelayedReference) {
  const auto inception = zoo::build_graph({"inception", "tiny"});
  const auto candle = zoo::build_graph({"candle_uno", "tiny"});
  auto fan = fan_plan(inception);  // the stem feeds two branch stages, which both feed the join
  expect_delayed_equal(inception, delayed(fan, inception));
  expect_delayed_equal(inception, delayed(widths_plan(inception), inception));  // 3 replicas into 2
  auto sized = resized(inception, fan, fan_sizes(inception, fan));
  for (auto& st : sized.stages) st.recompute = st.id % 2 == 0;
  expect_delayed_equal(inception, delayed(sized, inception));
  auto uno = make_plan(candle, request("graphpipe", "graph-1f1b", 4, 16, 4, 1));
  for (auto& st : uno.stages) st.recompute = true;
  expect_delayed_equal(candle, delayed(uno, candle));
}

// See Note [Early forwards]: the planner may cap the forwards a stage runs
// a step early; every cap trains the same weights.
TEST(DelayedPipeline, EveryCapOnEarlyForwardsEqualsTheDelayedReference) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  for (int cap : {0, 1}) {
    auto p = fan_plan(g);
    p.pipeline_early = cap;
    SCOPED_TRACE("pipeline_early " + std::to_string(cap));
    const auto res = train(g, delayed(p, g), kSteps);
    expect_equal(res, p);
    for (std::size_t r = 0; r < res.versions.size(); ++r) EXPECT_LE(res.versions[r], cap ? 2 : 1) << "rank " << r;
  }
}

// Two stages of two replicas each, every parameter synced by one method.
TEST(DelayedPipeline, ReplicatedStagesUnderEverySyncEqualTheDelayedReference) {
  const auto g = zoo::build_graph({"mmt", "tiny"});
  const auto topo = g.topo_order();
  std::set<std::string> first;
  for (std::size_t i = 0; i < topo.size() / 2; ++i) first.insert(g.op(topo[i]).name);
  for (const std::string method : {"allreduce", "ps", "sfb"}) {
    auto p = hand_plan(g, request("graphpipe", "graph-1f1b", 4, 16, 4, 0),
                       {[&](const std::string& n) { return first.count(n) > 0; }, [](const std::string&) { return true; }},
                       {2, 2});
    for (const auto& op : g.ops())
      for (const auto& param : op.params)
        p.grad_sync[param.name] = method == "sfb" && !cost::sfb_shape(op, param) ? "allreduce" : method;
    SCOPED_TRACE(method);
    expect_delayed_equal(g, delayed(p, g));
  }
}

// The runtime run synchronously on a delayed plan misses the reference: the
// tests above can fail.
TEST(DelayedPipeline, ASynchronousRunMissesTheDelayedReference) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  const auto p = delayed(fan_plan(g), g);
  ::setenv("TRIDENT_TEST_IGNORE_DELAY", "1", 1);
  const auto res = train(g, p, kSteps);
  ::unsetenv("TRIDENT_TEST_IGNORE_DELAY");
  double most = 0;
  for (const auto& weights : res.ranks)
    for (const auto& [name, w] : weights) most = std::max(most, (w - res.single.at(name)).abs().max().item<double>());
  EXPECT_GT(most, 1e-3);
}

TEST(DelayedPipeline, AScheduleThatIsNotOneFOneBIsRefusedNamingTheStage) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  auto p = fan_plan(g);
  p.schedule = "graph-zb";
  for (auto& st : p.stages) st.actions.clear();
  const auto zb = resized(g, p, std::vector<int>(p.stages.size(), 4));
  try {
    delayed(zb, g);
    FAIL() << "a zero-bubble plan was delayed";
  } catch (const plan::PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("stage"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pipeline_delay"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::executor
