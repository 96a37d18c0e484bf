// Delayed pipelines (Note [Delayed pipelines] in schedule/delayed.h): the
// per-step lists, their validation, and the steady-state prediction.
#include <gtest/gtest.h>

#include "trident/schedule/delayed.h"
#include "stage_graphs.h"

namespace trident::schedule {
namespace {

using test::chain;

TEST(Delayed, NextForwardsMoveIntoTheCooldown) {
  auto g = chain(3, 1, 2);
  const auto s = make_schedule("1f1b", g, 4);
  const auto d = delay_schedule(g, s);
  EXPECT_EQ(to_string(s.stages[0]), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(to_string(d[0].warmup), "F0 F1");
  EXPECT_EQ(to_string(d[0].body), "F2 B0 F3 B1 F4 B2 F5 B3");  // F4, F5: the next mini-batch's 0 and 1
  EXPECT_EQ(to_string(d[0].drain), "F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(to_string(d[2].body), "F0 B0 F1 B1 F2 B2 F3 B3");  // the last stage has no warm-up
  // Warm-up and drain make the synchronous list again.
  for (std::size_t st = 0; st < d.size(); ++st) {
    auto again = d[st].warmup;
    again.insert(again.end(), d[st].drain.begin(), d[st].drain.end());
    EXPECT_EQ(again, s.stages[st]) << "stage " << st;
  }
}

TEST(Delayed, StepsHoldAtMostTheirMicroBatchesInFlight) {
  for (const auto& name : {"1f1b", "graph-1f1b", "gpipe"})
    for (int p : {2, 4, 6})
      for (int m : {2, 4, 8}) {
        auto g = chain(p, 1, 2);
        const auto s = make_schedule(name, g, m);
        const auto u = unroll(s, delay_schedule(g, s), 4);
        const auto check = validate(g, u);
        for (int st = 0; st < p; ++st) EXPECT_LE(check.in_flight[st], m) << name << " p=" << p << " m=" << m;
      }
}

TEST(Delayed, RefusesSplitBackwardsAndOrdersItCannotCarry) {
  auto g = chain(3, 1, 2);
  EXPECT_THROW(delay_schedule(g, make_schedule("zb-h1", g, 4)), ScheduleError);
  auto s = make_schedule("1f1b", g, 4);
  s.stages[1] = parse_actions("F0 B0 F1 B1 F2 F3 B2 B3");
  try {
    delay_schedule(g, s);
    FAIL() << "a list that is not 1F1B's";
  } catch (const ScheduleError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1"), std::string::npos) << e.what();
  }
}

// A successor that warms up over more rows than its predecessor (per-stage
// sizes, the predecessor's warm-up clamped to its count) moves only the
// forwards its predecessor runs early; the rest start its step.
TEST(Delayed, EarlyForwardsStayWithinThePredecessors) {
  // Stage 0 has 2 micro-batches of 4 rows (warm-up clamped to 1: 4 rows);
  // stage 1 has 8 of 1 row and warms up over 5 — it moves only 4 early.
  auto g = chain(7, 1, 2);
  const auto s = make_schedule("graph-1f1b", g, std::vector<int>{2, 8, 8, 8, 8, 8, 8});
  EXPECT_EQ(to_string(s.stages[0]), "F0 F1 B0 B1");
  EXPECT_EQ(s.stages[1][5].kind, Action::Kind::kForward);  // F0 .. F5 before B0: a warm-up of 5
  const auto d = delay_schedule(g, s);
  EXPECT_EQ(to_string(d[0].warmup), "F0");
  EXPECT_EQ(to_string(d[1].warmup), "F0 F1 F2 F3");
  EXPECT_EQ(to_string(d[1].body), "F4 F5 B0 F6 B1 F7 B2 B3 F8 B4 F9 B5 F10 B6 F11 B7");
}

// A chain of p stages with m micro-batches: a synchronous step takes
// (m + p − 1)(F + B); the delayed steady state m(F + B), no bubble.
TEST(Delayed, SteadyStateHasNoFillOrDrain) {
  const double F = 1, B = 2;
  for (int p : {2, 4})
    for (int m : {4, 8}) {
      auto g = chain(p, F, B);
      const auto s = make_schedule("1f1b", g, m);
      const auto sync = simulate(g, s, m);
      const auto delayed = simulate_delayed(g, s, m);
      EXPECT_NEAR(sync.iteration_s, (m + p - 1) * (F + B), 1e-9);
      EXPECT_NEAR(delayed.iteration_s, m * (F + B), 1e-9) << "p=" << p << " m=" << m;
      EXPECT_NEAR(delayed.bubble_fraction, 0, 1e-9);
    }
  // A stage's own optimizer bounds the step from below.
  auto g = chain(2, F, B);
  g.stages[1].optimizer_s = 5;
  EXPECT_NEAR(simulate_delayed(g, make_schedule("1f1b", g, 4), 4).iteration_s, 4 * (F + B) + 5, 1e-9);
}

// See Note [Early forwards]: the chosen cap is never slower than the
// synchronous schedule, and with micro-batches to fill the pipeline it
// moves every warm-up forward.
TEST(Delayed, TheChosenCapIsNeverSlowerThanSynchronous) {
  for (int p : {2, 4, 6})
    for (int m : {1, 2, 4, 8}) {
      auto g = chain(p, 1, 2);
      for (auto& c : g.stages) c.optimizer_s = 0.5;
      const auto s = make_schedule("1f1b", g, m);
      const auto choice = choose_delayed(g, s, m);
      EXPECT_LE(choice.result.iteration_s, simulate(g, s, m).iteration_s + 1e-9) << "p=" << p << " m=" << m;
      EXPECT_LE(choice.result.iteration_s, simulate_delayed(g, s, m, 0).iteration_s + 1e-9);
      if (m >= p) EXPECT_EQ(choice.cap, m - 1) << "p=" << p << " m=" << m;
    }
}

}  // namespace
}  // namespace trident::schedule
