#include <gtest/gtest.h>

#include "trident/report/report.h"

namespace trident::report {
namespace {

nlohmann::json span(const std::string& name, const std::string& cat, int pid, int tid, double ts, double dur) {
  return {{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
}

// Two ranks, two steps of 1000 µs each: rank 0 computes 700 µs per step,
// rank 1 computes 600 µs and waits 300 µs.
nlohmann::json two_rank_trace() {
  auto ev = nlohmann::json::array();
  ev.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "rank 1 · stage 1"}}}});
  for (int s = 0; s < 2; ++s) {
    const double t = s * 1000;
    for (int r = 0; r < 2; ++r) ev.push_back(span("step " + std::to_string(s), "step", r, 1, t, 1000));
    ev.push_back(span("F0", "forward", 0, 0, t, 300));
    ev.push_back(span("B0", "backward", 0, 0, t + 300, 400));
    ev.push_back(span("wait F0", "wait", 1, 0, t, 300));
    ev.push_back(span("F0", "forward", 1, 0, t + 300, 200));
    ev.push_back(span("B0", "backward", 1, 0, t + 500, 400));
    ev.push_back(span("allreduce bucket 0", "sync", 1, 1, t + 900, 50));
  }
  return {{"traceEvents", ev},
          {"metadata", {{"mini_batch", 8}, {"plan", {{"predicted", {{"iteration_s", 0.0009}, {"samples_per_s", 8888.0}, {"bubble_fraction", 0.3}}}}}}}};
}

TEST(Report, SummaryMeasuresIterationBubbleAndExposedCommunication) {
  const auto s = summarize(two_rank_trace(), {{{"step", 2}, {"loss", 1.5}}, {{"step", 2}, {"test_accuracy", 0.75}}});
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.steps, 2);
  EXPECT_DOUBLE_EQ(s.iteration_s, 0.001);
  EXPECT_DOUBLE_EQ(s.samples_per_s, 8000);
  EXPECT_DOUBLE_EQ(s.bubble_fraction, 1 - (700.0 + 600.0) / 2000.0);
  EXPECT_DOUBLE_EQ(s.exposed_comm_s, 300e-6 / 2);  // per step and rank
  EXPECT_DOUBLE_EQ(*s.predicted_iteration_s, 0.0009);
  EXPECT_DOUBLE_EQ(*s.test_accuracy, 0.75);
  const auto text = summary_text(s);
  EXPECT_NE(text.find("1.00 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("0.90 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("35.0%"), std::string::npos) << text;
}

// The loader's figures (docs/data.md): the mean wait per step over the
// windows, its rate, replaced samples; a wait above a tenth of the
// iteration says the loader bounds the step.
TEST(Report, DataWaitAndTheLoaderThatBoundsTheStep) {
  const std::vector<nlohmann::json> metrics{
      {{"step", 1}, {"loss", 1.0}, {"data_wait_s", 0.0001}, {"data_samples_per_worker_s", 900.0}},
      {{"step", 2}, {"loss", 1.0}, {"data_wait_s", 0.0003}, {"data_samples_per_worker_s", 1100.0}, {"bad_samples", 2}}};
  const auto s = summarize(two_rank_trace(), metrics);
  EXPECT_DOUBLE_EQ(*s.data_wait_s, 0.0002);
  EXPECT_DOUBLE_EQ(*s.data_samples_per_worker_s, 1000.0);
  EXPECT_DOUBLE_EQ(s.bad_samples, 2);
  auto text = summary_text(s);
  EXPECT_NE(text.find("0.20 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("the loader bounds the step: rank 0 waited 20%"), std::string::npos) << text;
  EXPECT_NE(text.find("bad samples replaced: 2"), std::string::npos) << text;
  const auto quiet = summarize(two_rank_trace(), {{{"step", 1}, {"data_wait_s", 0.00005}}});
  EXPECT_EQ(summary_text(quiet).find("bounds the step"), std::string::npos);
  EXPECT_FALSE(summarize(two_rank_trace(), {}).data_wait_s);
}

// Measured memory per stage: the largest peak of its replicas, beside the
// plan's; only the last memory line counts.
TEST(Report, MemoryPerStageFromTheLastMemoryLine) {
  auto rank = [](int r, int stage, double peak, double planned) {
    return nlohmann::json{{"rank", r}, {"stage", stage}, {"replica", 0}, {"peak_rss_bytes", peak}, {"planned_bytes", planned}};
  };
  const auto s = summarize(two_rank_trace(), {{{"step", 1}, {"memory", {rank(0, 0, 1.0, 1.0)}}},
                                              {{"step", 2},
                                               {"memory", {rank(0, 0, 300.0, 100.0), rank(1, 1, 200.0, 50.0),
                                                           rank(2, 1, 250.0, 50.0), rank(3, -1, 90.0, 0.0)}}}});
  ASSERT_EQ(s.memory.size(), 3u);
  EXPECT_EQ(s.memory[0].stage, -1);
  EXPECT_EQ(s.memory[1].stage, 0);
  EXPECT_DOUBLE_EQ(s.memory[1].peak_rss_bytes, 300.0);
  EXPECT_EQ(s.memory[2].ranks, (std::vector<int>{1, 2}));
  EXPECT_DOUBLE_EQ(s.memory[2].peak_rss_bytes, 250.0);
  EXPECT_DOUBLE_EQ(s.memory[2].planned_bytes, 50.0);
}

// A GPU run's memory lines carry the GPU's peak too: the summary sets it
// beside the plan's bytes, which live on the device.
TEST(Report, OnGpusMemoryIsTheGpusPeak) {
  auto rank = [](int r, double rss, double gpu) {
    return nlohmann::json{{"rank", r},          {"stage", 0},     {"replica", r}, {"peak_rss_bytes", rss},
                          {"planned_bytes", 3 << 20}, {"peak_gpu_bytes", gpu}};
  };
  const auto s = summarize(two_rank_trace(), {{{"step", 2}, {"memory", {rank(0, 900 << 20, 5 << 20), rank(1, 800 << 20, 7 << 20)}}}});
  ASSERT_EQ(s.memory.size(), 1u);
  ASSERT_TRUE(s.memory[0].peak_gpu_bytes);
  EXPECT_DOUBLE_EQ(*s.memory[0].peak_gpu_bytes, 7 << 20);
  const auto text = summary_text(s);
  EXPECT_NE(text.find("peak on GPU"), std::string::npos) << text;
  EXPECT_NE(text.find("7.0 MiB"), std::string::npos) << text;
  EXPECT_EQ(text.find("900.0 MiB"), std::string::npos) << text;
}

TEST(Report, TimelineHasOneRowPerRankAndASpanPerEvent) {
  const auto svg = timeline_svg(two_rank_trace(), 1);
  EXPECT_NE(svg.find("rank 1 · stage 1"), std::string::npos);
  EXPECT_NE(svg.find("rank 0"), std::string::npos);
  // The last step: 2 + 3 compute spans and 1 sync span, plus 2 row backgrounds.
  std::size_t rects = 0;
  for (auto p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++rects;
  EXPECT_EQ(rects, 2u + 6u);
  EXPECT_NE(svg.find("#e15759"), std::string::npos) << "a wait is drawn";
}

// The simulated iteration drawn like the measured one: each stage on its
// first rank's row, every simulated span one rectangle.
TEST(Report, SimulatedTimelineDrawsEveryStageAndSpan) {
  plan::Plan p;
  p.stages.resize(2);
  p.stages[0].id = 0, p.stages[0].devices = {0};
  p.stages[1].id = 1, p.stages[1].devices = {1, 2};
  schedule::SimResult r;
  r.iteration_s = 0.010;
  using Lane = schedule::SimEvent::Lane;
  r.events = {{0, Lane::kCompute, "F0", 0, 0, 0.002}, {0, Lane::kSend, "send F0 -> s1", 0, 0.002, 0.003},
              {1, Lane::kCompute, "F0", 0, 0.003, 0.005}, {1, Lane::kCompute, "B0", 0, 0.005, 0.007},
              {1, Lane::kSync, "sync w", -1, 0.007, 0.008}, {1, Lane::kCompute, "optimizer", -1, 0.008, 0.009},
              {0, Lane::kCompute, "B0", 0, 0.007, 0.009}, {0, Lane::kCompute, "W0", 0, 0.009, 0.010}};
  const auto trace = simulated_trace(r, p);
  const auto s = summarize(trace, {});
  EXPECT_NEAR(s.iteration_s, 0.010, 1e-12);
  // Busy: F, B and W (a split backward's weight gradients) on the two ranks.
  EXPECT_NEAR(s.bubble_fraction, 1 - (0.002 + 0.002 + 0.001 + 0.002 + 0.002) / (2 * 0.010), 1e-9);
  const auto svg = timeline_svg(trace, 1);
  EXPECT_NE(svg.find("stage 1 (rank 1,2)"), std::string::npos) << svg;
  std::size_t rects = 0;
  for (auto q = svg.find("<rect"); q != std::string::npos; q = svg.find("<rect", q + 1)) ++rects;
  EXPECT_EQ(rects, 2u + 8u);  // rows of ranks 0 and 1, and the spans
  EXPECT_NE(svg.find("#f28e2b"), std::string::npos) << "the sync is drawn";
  EXPECT_NE(svg.find("#b07aa1"), std::string::npos) << "W is drawn in its own colour";
}

TEST(Report, LossCurveAndErrors) {
  const auto svg = loss_svg({{{"step", 10}, {"loss", 2.0}}, {{"step", 20}, {"loss", 1.0}}, {{"step", 20}, {"test_accuracy", 0.5}}});
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_THROW(summarize({{"traceEvents", nlohmann::json::array()}}, {}), ReportError);
  EXPECT_THROW(read_json("/nonexistent/trace.json"), ReportError);
}

}  // namespace
}  // namespace trident::report
