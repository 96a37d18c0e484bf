// Graph pipelines equal single-process training (docs/design.md, contract "Synchronous semantics"):
// every rank a thread, one Gloo group over a HashStore, the plan's stages
// run by StageExecutor with their replicas synced by the plan's methods —
// under every schedule, zero-bubble ones included.
#include "pipeline_harness.h"

namespace trident::executor {
namespace {

using namespace test;  // NOLINT: the harness

std::size_t modality_fields(const graph::OpGraph& g) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.is_input() && starts(op.name, "modality");
  return n;
}

class Pipelines : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(Pipelines, GraphpipePipedreamAndHybridEqualSingleProcess) {
  const auto& [model, schedule] = GetParam();
  const auto g = zoo::build_graph({model, "tiny"});
  const auto gp = make_plan(g, request("graphpipe", schedule, 4, 16, 4, 1));
  const auto pd = make_plan(g, request("pipedream", schedule, 4, 16, 4, 1));
  ASSERT_GT(gp.stages.size(), 1u) << "graphpipe planned one stage for " << model;
  ASSERT_GT(pd.stages.size(), 1u);
  // Stages with two replicas each: the first half of the ops, then the rest.
  const auto topo = g.topo_order();
  std::set<std::string> first;
  for (std::size_t i = 0; i < topo.size() / 2; ++i) first.insert(g.op(topo[i]).name);
  const auto hy = hand_plan(g, request("graphpipe", schedule, 4, 16, 4, 0),
                            {[&](const std::string& n) { return first.count(n) > 0; }, [](const std::string&) { return true; }},
                            {2, 2});
  for (const auto* p : {&gp, &pd, &hy}) {
    SCOPED_TRACE(p->partitioner + " " + std::to_string(p->stages.size()) + " stages");
    const auto res = train(g, *p, 2);
    expect_equal(res, *p);
    if (p == &gp && model == "mmt") {
      // Modalities' branch stages read only their own inputs: at least two
      // ranks read some modalities but not all of them.
      int partial = 0;
      for (const auto& f : res.fields) {
        std::size_t modalities = 0;
        for (const auto& name : f) modalities += starts(name, "modality");
        partial += modalities > 0 && modalities < modality_fields(g);
      }
      EXPECT_GE(partial, 2) << "graphpipe should give separate modalities separate source stages";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Pipelines,
                         ::testing::Combine(::testing::Values("mmt", "dlrm", "candle_uno", "inception"),
                                            ::testing::Values("gpipe", "1f1b", "graph-1f1b", "zb-h1", "zb-h2",
                                                              "graph-zb")),
                         [](const auto& info) {
                           auto name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           for (auto& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(Pipeline, FanOutFanInStagesEqualSingleProcess) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  const auto p = fan_plan(g);
  ASSERT_EQ(p.stages.size(), 4u);
  int fan_out = 0;
  for (const auto& e : p.edges) fan_out += e.from == p.edges.front().from;
  EXPECT_GE(fan_out, 2) << "the stem stage feeds both branch stages";
  expect_equal(train(g, p, 3), p);
}

TEST(Pipeline, StagesOfDifferentWidthsEqualSingleProcess) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  const auto p = widths_plan(g);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].devices.size() + p.stages[1].devices.size(), 5u);
  expect_equal(train(g, p, 3), p);
}

// See Note [Recomputation] (stage_executor.h): stages that keep only their
// inputs and run their forward again before each backward train to the
// weights of one process — a fork stage and the join, a stage of three
// replicas feeding one of two, and every other stage of a planned mmt.
TEST(Pipeline, RecomputingStagesEqualSingleProcess) {
  const auto inception = zoo::build_graph({"inception", "tiny"});
  const auto mmt = zoo::build_graph({"mmt", "tiny"});
  auto fan = fan_plan(inception);
  auto widths = widths_plan(inception);
  auto planned = make_plan(mmt, request("graphpipe", "graph-1f1b", 4, 16, 4, 1));
  ASSERT_GE(planned.stages.size(), 3u);
  for (auto& st : planned.stages) st.recompute = st.id % 2 == 0;
  for (auto& st : fan.stages)  // the stem (the fork) and the join
    st.recompute = std::any_of(st.ops.begin(), st.ops.end(), [&](const std::string& op) {
      return starts(op, "stem") || inception.id_of(op) == inception.loss();
    });
  widths.stages[0].recompute = true;
  for (auto [g, p] : {std::pair{&inception, &fan}, {&inception, &widths}, {&mmt, &planned}}) {
    SCOPED_TRACE(p->model + " " + std::to_string(p->stages.size()) + " stages");
    plan::validate_plan(*p, *g);
    expect_equal(train(*g, *p, 3), *p);
  }
}

// GraphPipe's per-stage micro-batch sizes (see Note [Micro-batch ratios] in
// schedule/schedule.h) train to the weights and per-step losses of one
// process: candle_uno's three branch stages of 32, 16 and 8 rows joined by a
// stage of 32 (the plan a new user wrote by hand); inception with its fork
// (the stem) at 4, branch stages at 8 and 2 and the join at 16; a stage of
// three replicas at 6 rows feeding two replicas at 12; and a planned mmt
// pipeline with alternating sizes and recomputing stages. All schedules.
TEST(Pipeline, StagesWithTheirOwnMicroBatchSizesEqualSingleProcess) {
  const auto candle = zoo::build_graph({"candle_uno", "tiny"});
  const auto inception = zoo::build_graph({"inception", "tiny"});
  const auto mmt = zoo::build_graph({"mmt", "tiny"});
  auto branch = [](int b) { return [b](const std::string& n) { return starts(n, "branch" + std::to_string(b) + ".") || n == "feature" + std::to_string(b); }; };
  const auto uno = hand_plan(candle, request("graphpipe", "graph-1f1b", 4, 64, 16, 0),
                             {branch(0), branch(1), branch(2), [](const std::string&) { return true; }}, {1, 1, 1, 1});
  ASSERT_EQ(uno.stages.size(), 4u);
  std::vector<int> uno_sizes;  // by stage id: the branches' 32, 16, 8 in the order assemble put them, the join 32
  for (const auto& st : uno.stages) {
    int b = 32;
    for (int i = 0; i < 3; ++i)
      if (starts(st.ops.back(), "branch" + std::to_string(i) + ".")) b = 32 >> i;
    uno_sizes.push_back(b);
  }
  const auto fan = fan_plan(inception);
  const auto widths = widths_plan(inception);
  std::vector<int> widths_sizes{widths.stages[0].devices.size() == 3 ? 6 : 12, widths.stages[0].devices.size() == 3 ? 12 : 6};
  auto planned = make_plan(mmt, request("graphpipe", "graph-1f1b", 4, 16, 4, 1));
  std::vector<int> mmt_sizes;
  for (const auto& st : planned.stages) mmt_sizes.push_back(st.id % 2 ? 8 : 2);
  for (const auto& schedule : schedule::all_schedule_names()) {
    std::vector<std::pair<const graph::OpGraph*, plan::Plan>> plans;
    const bool split = schedule::is_zero_bubble(schedule);
    auto with = [&](const graph::OpGraph& g, plan::Plan p, const std::vector<int>& sizes) {
      p.schedule = schedule;
      for (auto& [name, method] : p.grad_sync)  // SFB does not take a split backward (plan.cc, check_sfb_order)
        if (split && method == "sfb") method = "allreduce";
      plans.emplace_back(&g, resized(g, p, sizes));
    };
    with(candle, uno, uno_sizes);
    with(inception, fan, fan_sizes(inception, fan));
    with(inception, widths, widths_sizes);
    with(mmt, planned, mmt_sizes);
    for (auto& st : plans.back().second.stages) st.recompute = st.id % 2 == 1;
    for (const auto& [g, p] : plans) {
      SCOPED_TRACE(p.model + " " + schedule + ": " + report::micro_batch_summary(p));
      ASSERT_FALSE(p.one_micro_batch_size());
      const auto res = train(*g, p, 3);
      expect_equal(res, p);
      for (std::size_t step = 0; step < res.loss.size(); ++step)
        EXPECT_NEAR(res.loss[step], res.single_loss[step], 1e-5 * std::abs(res.single_loss[step])) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace trident::executor
