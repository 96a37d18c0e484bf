// Split backwards (Note [Split backward]) and the zero-bubble schedules
// (Note [Zero-bubble schedules]): what the validator refuses, and what the
// schedules buy in simulated time at the memory they keep.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "trident/schedule/schedule.h"
#include "trident/schedule/simulator.h"

namespace trident::schedule {
namespace {

// A chain of p stages whose micro-batch takes F = f, B = b − w and W = w.
StageGraph chain(int p, double f, double b, double w) {
  StageGraph g;
  for (int i = 0; i < p; ++i) {
    g.stages.push_back({"s" + std::to_string(i), 1, f, b});
    g.stages.back().weight_s = w;
  }
  for (int i = 0; i + 1 < p; ++i) g.edges.push_back({i, i + 1});
  return g;
}

std::string refusal(const StageGraph& g, const std::vector<std::string>& lists) {
  Schedule s{"hand", 2, {}};
  for (const auto& l : lists) s.stages.push_back(parse_actions(l));
  try {
    validate(g, s);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return "";
}

TEST(SplitBackward, ValidatorRefusesAWBeforeItsBAndAStepBeforeAnyAction) {
  const auto g = chain(2, 1, 2, 1);
  EXPECT_EQ(to_string(parse_actions("F0 B0 W0 F1 B1 W1 S")), "F0 B0 W0 F1 B1 W1 S");
  EXPECT_THROW(parse_actions("F0 B0 X0"), ScheduleError);
  EXPECT_NE(refusal(g, {"F0 F1 W0 B0 B1", "F0 B0 F1 B1"}).find("stage 0: W0 comes before its own B0"), std::string::npos);
  EXPECT_NE(refusal(g, {"F0 F1 B0 B1 S W0", "F0 B0 F1 B1"}).find("stage 0: S comes before W0; the optimizer step"),
            std::string::npos);
  EXPECT_NE(refusal(g, {"F0 F1 B0 W0 B1 W0", "F0 B0 F1 B1"}).find("W0 appears twice"), std::string::npos);
  EXPECT_NE(refusal(g, {"F0 F1 B0 B1 W2", "F0 B0 F1 B1"}).find("W2 is outside micro-batches 0..1"), std::string::npos);
  EXPECT_EQ(refusal(g, {"F0 F1 B0 B1 W1 W0 S", "F0 B0 W0 F1 B1 W1"}), "");
}

// A split micro-batch holds its activations until its W.
TEST(SplitBackward, AMicroBatchIsInFlightUntilItsW) {
  const auto g = chain(2, 1, 2, 1);
  Schedule s{"hand", 2, {parse_actions("F0 B0 F1 B1 W0 W1"), parse_actions("F0 B0 F1 B1")}};
  EXPECT_EQ(validate(g, s).in_flight, (std::vector<int>{2, 1}));
  const auto r = simulate(g, s, 2);
  double w0 = -1;
  for (const auto& e : r.events)
    if (e.stage == 0 && e.name == "W0") w0 = e.end - e.start;
  EXPECT_DOUBLE_EQ(w0, 1);  // W takes weight_s, its B the rest of backward_s
  EXPECT_DOUBLE_EQ(r.busy_s[0], 2 * (1 + 2));
}

// The most any stage holds: the peak memory of a pipeline of equal stages.
int most(const SimResult& r) { return *std::max_element(r.in_flight.begin(), r.in_flight.end()); }

// Qi et al.'s ZB-H1 keeps 1F1B's peak memory (here: p micro-batches on some
// stage) and reports the bubble (p − 1)(T_F + T_B − T_W) in place of
// 1F1B's (p − 1)(T_F + T_B + T_W), ZB-H2 about none at 2p − 1. With unit
// times on 4 stages, 8 micro-batches: 1F1B 33, the paper's ZB-H1 27; the
// list scheduler reaches 29 for zb-h1 (bubble within (p − 1)(T_F + T_B))
// and 27 for zb-h2 (within (p − 1) T_F).
TEST(ZeroBubble, ChainSchedulesCutOneFOneBsBubbleAtItsMemory) {
  const int p = 4, m = 8;
  const auto g = chain(p, 1, 2, 1);
  const auto one = simulate(g, make_schedule("1f1b", g, m), m);
  const auto h1 = simulate(g, make_schedule("zb-h1", g, m), m);
  const auto h2 = simulate(g, make_schedule("zb-h2", g, m), m);
  EXPECT_DOUBLE_EQ(one.iteration_s, (m + p - 1) * 3.0);
  EXPECT_EQ(most(h1), most(one));
  EXPECT_LE(h1.iteration_s, 3.0 * m + (p - 1) * (1 + 1) + 1e-9);
  EXPECT_LT(h1.iteration_s, one.iteration_s);
  EXPECT_LE(h2.iteration_s, 3.0 * m + (p - 1) * 1 + 1e-9);
  EXPECT_LE(most(h2), 2 * p - 1);
  for (const auto* r : {&h1, &h2})
    for (int st = 0; st < p; ++st) EXPECT_DOUBLE_EQ(r->busy_s[st], 3.0 * m);
}

// s0 -> {heavy s1, light s2} -> s3: a chain-style schedule leaves the light
// branch waiting for the join; graph-zb fills it with W and keeps
// graph-1f1b's peak memory.
TEST(ZeroBubble, GraphZbFillsTheWaitsOfUnequalBranches) {
  StageGraph g = chain(4, 1, 2, 1);
  g.edges = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  g.stages[1].forward_s = 2, g.stages[1].backward_s = 4, g.stages[1].weight_s = 2;
  const int m = 8;
  const auto graph = simulate(g, make_schedule("graph-1f1b", g, m), m);
  const auto zb = simulate(g, make_schedule("graph-zb", g, m), m);
  const auto h1 = simulate(g, make_schedule("zb-h1", g, m), m);
  EXPECT_EQ(most(zb), most(graph));
  EXPECT_LT(zb.iteration_s, graph.iteration_s);
  EXPECT_LE(zb.iteration_s, h1.iteration_s);
}

StageGraph random_dag(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> time(0.5, 2.0), share(0.3, 0.6);
  StageGraph g;
  for (int i = 0; i < n; ++i) {
    const double f = time(rng), b = 2 * f * time(rng) / 1.25;
    g.stages.push_back({"s" + std::to_string(i), 1, f, b, 1e6 * time(rng), 1e6 * time(rng)});
    g.stages.back().weight_s = b * share(rng);
  }
  for (int j = 1; j < n; ++j)
    for (int i = 0; i < j; ++i)
      if (rng() % 3 == 0) g.edges.push_back({i, j, 0.05 * time(rng), 0.05 * time(rng)});
  return g;
}

// The property graph-zb is built for: on random stage DAGs with random F, B
// and W times and memory, it is never slower than graph-1f1b and needs no
// more memory on the device that needs the most.
// (graph-zb keeps the fastest of its candidates, one of them graph-1f1b's
// order with each W right after its B, so it is never slower by
// construction; the list scheduler must beat that one often to earn its
// place.)
TEST(ZeroBubble, OnRandomDagsGraphZbIsNeverSlowerThanGraphOneFOneBAtItsMemory) {
  std::mt19937 rng(5);
  int faster = 0, listed = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 8), m = 1 + static_cast<int>(rng() % 12);
    const auto g = random_dag(rng, n);
    const auto base = simulate(g, make_schedule("graph-1f1b", g, m), m);
    const auto zb = simulate(g, make_schedule("graph-zb", g, m), m);
    EXPECT_LE(zb.iteration_s, base.iteration_s * (1 + 1e-9)) << "trial " << trial;
    auto peak = [](const SimResult& r) { return *std::max_element(r.peak_memory_bytes.begin(), r.peak_memory_bytes.end()); };
    EXPECT_LE(peak(zb), peak(base) * (1 + 1e-9)) << "trial " << trial;
    faster += zb.iteration_s < base.iteration_s * (1 - 1e-9);
    auto after = make_schedule("graph-1f1b", g, m);
    after.name = "W after B";
    for (auto& list : after.stages) list = weights_after_backwards(list);
    listed += zb.iteration_s < simulate(g, after, m).iteration_s * (1 - 1e-9);
  }
  EXPECT_GT(faster, 150);  // the split pays on most graphs, not only never costs
  EXPECT_GT(listed, 60);   // 101 of 300 when written
}

// See Note [Micro-batch ratios]: every zero-bubble schedule on random DAGs
// with per-stage counts is valid, has an F, a B and a W per micro-batch, and
// simulates.
TEST(ZeroBubble, PerStageMicroBatchCountsOnRandomDagsAreValid) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 7);
    const auto g = random_dag(rng, n);
    std::vector<int> counts;
    for (int st = 0; st < n; ++st) counts.push_back(1 << (rng() % 4));
    for (const auto& name : zero_bubble_names()) {
      Schedule s;
      ASSERT_NO_THROW(s = make_schedule(name, g, counts)) << name << " trial " << trial;
      for (int st = 0; st < n; ++st) EXPECT_EQ(static_cast<int>(s.stages[st].size()), 3 * counts[st]);
      EXPECT_GT(simulate(g, s, 64).iteration_s, 0);
    }
  }
}

}  // namespace
}  // namespace trident::schedule
