#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "trident/schedule/schedule.h"
#include "trident/schedule/simulator.h"
#include "stage_graphs.h"

namespace trident::schedule {
namespace {

using test::chain;

// s0 -> {s1, s2} -> s3
StageGraph diamond(double f, double b) {
  StageGraph g = chain(4, f, b);
  g.edges = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  return g;
}

TEST(Simulator, ChainTakesMPlusPMinusOneSteps) {
  const double F = 1.0, B = 2.0;
  for (int p : {1, 2, 4, 5})
    for (int m : {1, 3, 4, 8})
      for (const auto& name : schedule_names()) {
        auto g = chain(p, F, B);
        auto r = simulate(g, make_schedule(name, g, m), 8 * m);
        EXPECT_NEAR(r.iteration_s, (m + p - 1) * (F + B), 1e-9) << name << " p=" << p << " m=" << m;
        EXPECT_NEAR(r.bubble_fraction, (p - 1.0) / (m + p - 1), 1e-9) << name;
        EXPECT_NEAR(r.samples_per_s, 8 * m / r.iteration_s, 1e-9);
      }
}

TEST(Simulator, OneFOneBBoundsInFlightAndGpipeDoesNot) {
  auto g = chain(4, 1, 2);
  auto one = simulate(g, make_schedule("1f1b", g, 8), 8);
  auto gp = simulate(g, make_schedule("gpipe", g, 8), 8);
  EXPECT_EQ(one.in_flight, (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(gp.in_flight, (std::vector<int>{8, 8, 8, 8}));
  g.stages[0].activation_bytes = 10, g.stages[0].static_bytes = 5;
  EXPECT_DOUBLE_EQ(simulate(g, make_schedule("1f1b", g, 8), 8).peak_memory_bytes[0], 45);
}

TEST(Simulator, GraphOneFOneBRunsBranchesTogether) {
  auto g = diamond(1, 2);
  const int m = 6;
  auto graph = simulate(g, make_schedule("graph-1f1b", g, m), m);
  EXPECT_EQ(graph.depth, 3);
  EXPECT_NEAR(graph.iteration_s, (m + 3 - 1) * 3.0, 1e-9);
  EXPECT_EQ(graph.in_flight, (std::vector<int>{3, 2, 2, 1}));
  // 1F1B on the stages' linear order keeps more micro-batches in flight.
  auto linear = simulate(g, make_schedule("1f1b", g, m), m);
  EXPECT_EQ(linear.in_flight, (std::vector<int>{4, 3, 2, 1}));
}

TEST(Simulator, TransfersAndGradientSyncTakeTime) {
  auto g = chain(2, 1, 2);
  g.edges[0].forward_s = 0.5, g.edges[0].backward_s = 0.25;
  auto r = simulate(g, make_schedule("1f1b", g, 1), 1);
  EXPECT_NEAR(r.iteration_s, 1 + 0.5 + 1 + 2 + 0.25 + 2, 1e-9);
  // One stage: sync of a gradient ready at the start of the last backward
  // overlaps it (WFBP); one ready at its end does not.
  auto one = chain(1, 1, 2);
  one.stages[0].sync = {{"w", 0.0, 3.0}};
  EXPECT_NEAR(simulate(one, make_schedule("1f1b", one, 1), 1).iteration_s, 4, 1e-9);
  one.stages[0].sync = {{"w", 1.0, 3.0}};
  EXPECT_NEAR(simulate(one, make_schedule("1f1b", one, 1), 1).iteration_s, 6, 1e-9);
  auto trace = chrome_trace(one, simulate(one, make_schedule("1f1b", one, 1), 1));
  int complete = 0;
  for (const auto& ev : trace["traceEvents"]) complete += ev["ph"] == "X";
  EXPECT_EQ(complete, 3);  // F0, B0, sync w
}

// The optimizer step follows a stage's last action; the loss all-reduce ends
// the iteration once every stage is done.
TEST(Simulator, OptimizerAndStepAllReduceTakeTime) {
  auto g = chain(2, 1, 2);
  g.stages[0].optimizer_s = 0.5, g.stages[1].optimizer_s = 4;
  g.step_s = 0.25;
  const auto r = simulate(g, make_schedule("1f1b", g, 1), 1);
  // s1's backward ends at 4, s0's at 6; s1's optimizer then ends at 8, s0's at 6.5.
  EXPECT_NEAR(r.iteration_s, 8 + 0.25, 1e-9);
}

// See Note [Shared cores]: branches that compute at once on one core take twice
// as long; spans that never overlap keep their own durations.
TEST(Simulator, ProcessesSharingCoresRunSlowerWhenBusyTogether) {
  const double F = 0.010, B = 0.020;
  auto g = diamond(F, B);
  for (auto& st : g.stages) st.optimizer_s = 0.004;
  const auto s = make_schedule("graph-1f1b", g, 1);
  const double dedicated = simulate(g, s, 1).iteration_s;
  EXPECT_NEAR(dedicated, 3 * (F + B) + 0.004, 1e-9);
  g.cores_per_node = 4;  // as many cores as processes: nothing shared
  EXPECT_FALSE(g.oversubscribed());
  EXPECT_NEAR(simulate(g, s, 1).iteration_s, dedicated, 1e-12);
  // One core for four processes. s1 and s2 compute their forward (and later
  // their backward) together, each at half speed; s3's optimizer (after its
  // backward at t = 0.06) overlaps s1's and s2's backward, a third each; the
  // optimizers at the end overlap too.
  g.cores_per_node = 1;
  ASSERT_TRUE(g.oversubscribed());
  const auto shared = simulate(g, s, 1);
  EXPECT_GT(shared.iteration_s, dedicated + (F + B) - 1e-9);  // the branches' overlap alone
  // Work is conserved on one core: once it is busy from start to end, the
  // iteration is the sum of all compute.
  EXPECT_NEAR(shared.iteration_s, 4 * (F + B) + 4 * 0.004, 1e-9);
  // A chain never computes two stages at once: sharing changes nothing.
  auto c = chain(3, F, B);
  const auto cs = make_schedule("gpipe", c, 1);
  const double alone = simulate(c, cs, 1).iteration_s;
  c.cores_per_node = 1;
  ASSERT_TRUE(c.oversubscribed());
  EXPECT_NEAR(simulate(c, cs, 1).iteration_s, alone, 1e-12);
}

// See Note [Shared cores] with a measured throughput (see Note [Core throughput]):
// two single-threaded replicas on a node whose two busy threads do 1.5
// threads' work run at 0.75 of their speed; a replica profiled at two
// threads, alone on that node, runs at its own speed.
TEST(Simulator, MeasuredCoreThroughputSlowsReplicasThatComputeTogether) {
  StageGraph g = chain(1, 0.010, 0.020);
  g.stages[0].replicas = 2;
  g.stages[0].optimizer_s = 0.003;
  const auto s = make_schedule("1f1b", g, 2);
  const double dedicated = simulate(g, s, 2).iteration_s;
  EXPECT_NEAR(dedicated, 2 * (0.010 + 0.020) + 0.003, 1e-12);
  g.cores_per_node = 2;
  EXPECT_FALSE(g.oversubscribed());
  g.core_throughput = {1.0, 1.5};
  ASSERT_TRUE(g.oversubscribed());
  EXPECT_DOUBLE_EQ(g.speed(2, 1), 0.75);
  EXPECT_DOUBLE_EQ(g.speed(4, 1), 1.5 / 4);  // beyond the measured: the last entry
  EXPECT_NEAR(simulate(g, s, 2).iteration_s, dedicated / 0.75, 1e-12);
  g.stages[0].replicas = 1, g.stages[0].threads = 2;
  EXPECT_FALSE(g.oversubscribed());
  EXPECT_NEAR(simulate(g, s, 2).iteration_s, dedicated, 1e-12);
}

TEST(Schedule, EveryGeneratedScheduleOnRandomDagsIsValid) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7), m = 1 + static_cast<int>(rng() % 9);
    StageGraph g = chain(n, 1, 1);
    g.edges.clear();
    for (int j = 1; j < n; ++j)
      for (int i = 0; i < j; ++i)
        if (rng() % 3 == 0) g.edges.push_back({i, j});
    const auto h = g.heights();
    for (const auto& name : schedule_names()) {
      auto s = make_schedule(name, g, m);
      ScheduleCheck c;
      ASSERT_NO_THROW(c = validate(g, s)) << name << " trial " << trial;
      for (int st = 0; st < n; ++st) {
        if (name == "graph-1f1b") {
          EXPECT_EQ(c.in_flight[st], std::min(h[st], m));
        }
        if (name == "gpipe") {
          EXPECT_EQ(c.in_flight[st], m);
        }
      }
    }
  }
}

// See Note [Micro-batch ratios]: stages with their own micro-batch counts (each
// neighbour's dividing the other's) get valid schedules from every
// generator on random DAGs; the simulator runs them.
TEST(Schedule, PerStageMicroBatchCountsOnRandomDagsAreValid) {
  std::mt19937 rng(11);
  int mixed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    StageGraph g = chain(n, 1, 1);
    g.edges.clear();
    for (int j = 1; j < n; ++j)
      for (int i = 0; i < j; ++i)
        if (rng() % 3 == 0) g.edges.push_back({i, j});
    std::vector<int> counts;  // powers of two: every pair divides
    for (int st = 0; st < n; ++st) counts.push_back(1 << (rng() % 4));
    mixed += *std::min_element(counts.begin(), counts.end()) != *std::max_element(counts.begin(), counts.end());
    for (const auto& name : schedule_names()) {
      auto s = make_schedule(name, g, counts);
      ScheduleCheck c;
      try {
        c = validate(g, s);
      } catch (const std::exception& e) {
        std::string cs;
        for (int x : counts) cs += std::to_string(x) + " ";
        std::string es;
        for (auto& ed : g.edges) es += std::to_string(ed.from) + "->" + std::to_string(ed.to) + " ";
        FAIL() << name << " trial " << trial << " counts " << cs << " edges " << es << ": " << e.what();
      }
      for (int st = 0; st < n; ++st) {
        EXPECT_EQ(static_cast<int>(s.stages[st].size()), 2 * counts[st]);
        EXPECT_LE(c.in_flight[st], counts[st]);
      }
      EXPECT_GT(simulate(g, s, 64).iteration_s, 0);
    }
  }
  EXPECT_GT(mixed, 200);
}

// A stage of micro-batch 2b after one of b: its forward waits for both of
// the predecessor's, and the predecessor's backwards each wait for the one
// backward of the successor that covers their rows.
TEST(Simulator, AStageOfTwiceTheMicroBatchConsumesTwoOfItsPredecessor) {
  auto g = chain(2, 1, 2);
  g.stages[1].forward_s = 2, g.stages[1].backward_s = 4;  // twice the rows, twice the time
  const auto s = make_schedule("gpipe", g, std::vector<int>{4, 2});
  EXPECT_EQ(to_string(s.stages[1]), "F0 F1 B0 B1");
  const auto r = simulate(g, s, 8);
  double f1_start = -1, b0_end = -1, up_b0_start = -1;
  for (const auto& e : r.events) {
    if (e.stage == 1 && e.name == "F0") f1_start = e.start;
    if (e.stage == 1 && e.name == "B1") b0_end = e.end;
    if (e.stage == 0 && e.name == "B2") up_b0_start = e.start;
  }
  EXPECT_DOUBLE_EQ(f1_start, 2);  // after F0 and F1 of stage 0
  EXPECT_DOUBLE_EQ(up_b0_start, b0_end);  // stage 0's micro-batches 2, 3 are stage 1's 1
  // Counts that do not nest are refused, naming both stages.
  auto bad = make_schedule("gpipe", g, std::vector<int>{4, 2});
  bad.counts = {3, 2};
  bad.stages[0] = parse_actions("F0 F1 F2 B0 B1 B2");
  try {
    validate(g, bad);
    FAIL();
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 0 has 3 micro-batches and stage 1 2; one count must divide"),
              std::string::npos)
        << e.what();
  }
}

TEST(Schedule, ValidatorRejectsMissingRepeatedAndReorderedActions) {
  auto g = chain(2, 1, 1);
  auto expect = [&](std::vector<std::string> lists, const std::string& needle) {
    Schedule s{"hand", 2, {}};
    for (const auto& l : lists) s.stages.push_back(parse_actions(l));
    try {
      validate(g, s);
      FAIL() << "expected ScheduleError for " << lists[0] << " | " << lists[1];
    } catch (const ScheduleError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect({"F0 F1 B0", "F0 B0 F1 B1"}, "stage 0: B1 is missing");
  expect({"F0 F1 B0 B1 B1", "F0 B0 F1 B1"}, "B1 appears twice");
  expect({"F0 B1 F1 B0", "F0 B0 F1 B1"}, "B1 comes before its own F1");
  expect({"F0 F2 B0 B1", "F0 B0 F1 B1"}, "outside micro-batches 0..1");
  // Stage 0 wants B0 back before it sends F1; stage 1 wants F1 before B0.
  expect({"F0 B0 F1 B1", "F0 F1 B0 B1"}, "deadlocks: stage 0 at B0 waits for B0 of stage 1; stage 1 at F1 waits for F1 of stage 0");
  Schedule ok{"hand", 2, {parse_actions("F0 F1 B0 B1"), parse_actions("F0 B0 F1 B1")}};
  EXPECT_EQ(validate(g, ok).in_flight, (std::vector<int>{2, 1}));
  EXPECT_THROW(parse_actions("F0 X1"), ScheduleError);
  EXPECT_EQ(to_string(parse_actions("F0 F1 B0")), "F0 F1 B0");
}

TEST(StageGraph, CyclesAndBadEdgesAreRejected) {
  auto g = chain(3, 1, 1);
  g.edges.push_back({2, 0});
  EXPECT_THROW(make_schedule("1f1b", g, 2), ScheduleError);
  g.edges.back() = {0, 7};
  EXPECT_THROW(g.check(), ScheduleError);
  EXPECT_THROW(make_schedule("zb", chain(2, 1, 1), 2), ScheduleError);
}

}  // namespace
}  // namespace trident::schedule
