// Pipelines' transport and clocks: transfers over the store backend (as on
// NCCL's streams too), a device clock timing every action, a wrong edge
// shape named at the sender, and the emulated clock following the simulator.
#include "pipeline_harness.h"

namespace trident::executor {
namespace {

using namespace test;  // NOLINT: the harness

// Stage-to-stage messages carried by the store backend (the CUDA build's
// CPU tensors), with replicated stages of different widths, fan-out and
// fan-in, matched
//  - by tag, as Gloo does (see Note [Tags]);
//  - in order per pair of ranks, ignoring tags: each rank sends a peer its
//    messages in the order the peer posts their receives;
//  - as on NCCL's streams (kStreamPerPair: a pair's operations run in the
//    order each rank issued them), with a link per direction (Note
//    [Pipeline transfers on GPUs]). On one shared link these plans would
//    wait forever: a stage's receive of gradients, posted ahead, would hold
//    up the activations it sends.
TEST(Pipeline, TransfersOverTheStoreBackendByTagInOrderOrAsOnNcclStreamsEqualSingleProcess) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  const auto widths = widths_plan(g);
  const auto m = zoo::build_graph({"mmt", "tiny"});
  const auto branches = make_plan(m, request("graphpipe", "graph-1f1b", 4, 16, 4, 1));
  ASSERT_GT(branches.stages.size(), 1u);
  struct Mode {
    comm::Matching matching;
    bool per_direction;
    const char* name;
  };
  for (const auto& mode : {Mode{comm::Matching::kByTag, false, "by tag"},
                           Mode{comm::Matching::kInOrder, false, "in order"},
                           Mode{comm::Matching::kStreamPerPair, true, "as on NCCL's streams, a link per direction"}}) {
    SCOPED_TRACE(mode.name);
    expect_equal(train(g, widths, 3, 20, true, mode.matching, mode.per_direction), widths);
    expect_equal(train(m, branches, 3, 20, true, mode.matching, mode.per_direction), branches);
  }
}

// See Note [GPU spans]: with a device clock the compute lane is timed by its
// marks, not by the host. This clock puts mark n at µs 1000·(n+1), far from
// any system-clock time; rank 0 keeps host times, for contrast.
class CountingClock final : public executor::DeviceClock {
 public:
  std::int64_t mark() override { return marks_++; }
  std::vector<std::int64_t> times() override {
    std::vector<std::int64_t> out;
    for (std::int64_t n = 0; n < marks_; ++n) out.push_back(1000 * (n + 1));
    marks_ = 0;
    return out;
  }

 private:
  std::int64_t marks_ = 0;
};

TEST(Pipeline, WithADeviceClockEveryActionIsTimedByItsMarks) {
  const auto g = zoo::build_graph({"mlp", "tiny"});
  const auto p = make_plan(g, request("pipedream", "1f1b", 2, 16, 4, 1));
  ASSERT_EQ(p.stages.size(), 2u);
  auto gen = at::detail::createCPUGenerator(3);
  const auto batch = data::random_batch(g, p.mini_batch, gen);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<executor::TraceLog> traces(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        nn::GraphModule module(g, 7);
        executor::StageExecutor ex(module, p, comm::Group::over_store(store, r, 2, std::chrono::milliseconds(20000)));
        CountingClock clock;
        if (r == 1) traces[r].device = &clock;
        auto source = [&](std::int64_t b, std::int64_t e, const std::set<std::string>& fields) {
          nn::Batch out;
          for (const auto& f : fields) out[f] = batch.at(f).slice(0, b, e);
          return out;
        };
        ex.run(source, static_cast<double>(p.mini_batch), {}, &traces[r]);
        traces[r].resolve();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    const int stage = plan::stage_of_devices(p)[r];
    std::set<std::string> actions, timed;
    for (const auto& a : schedule::parse_actions(p.stages[stage].actions))
      actions.insert((a.kind == schedule::Action::Kind::kBackward ? "B" : "F") + std::to_string(a.micro_batch));
    for (const auto& e : traces[r].events) {
      if (e.cat != "forward" && e.cat != "backward") continue;
      timed.insert(e.name);
      EXPECT_GT(e.dur_us, 0) << e.name;
      if (r == 1)
        EXPECT_TRUE(e.ts_us >= 1000 && e.ts_us % 1000 == 0 && e.ts_us < 1000000) << e.name << " at " << e.ts_us;
      else
        EXPECT_GT(e.ts_us, 1000000000) << e.name << " at " << e.ts_us;
    }
    EXPECT_EQ(timed, actions) << "rank " << r;
  }
}

TEST(Pipeline, WrongEdgeShapeFailsAtTheSenderNamingTheEdge) {
  const auto g = zoo::build_graph({"mlp", "tiny"});
  auto p = make_plan(g, request("pipedream", "1f1b", 2, 8, 4, 1));
  ASSERT_EQ(p.stages.size(), 2u);
  auto& t = p.edges.at(0).tensors.at(0);
  t.shape.back() += 1;
  const auto res = train(g, p, 1, 2);
  const int sender = p.stages[p.edges[0].from].devices[0];
  EXPECT_NE(res.errors[sender].find("edge '" + t.op + "' (stage 0 -> stage 1)"), std::string::npos) << res.errors[sender];
  EXPECT_NE(res.errors[sender].find("micro-batch 0"), std::string::npos) << res.errors[sender];
  const int receiver = p.stages[p.edges[0].to].devices[0];
  EXPECT_NE(res.errors[receiver].find("action F0: waited for activations of '" + t.op + "'"), std::string::npos)
      << res.errors[receiver];
}

// See Note [Emulation]: the emulated clock keeps the simulator's timing. Modelled
// times of tens of ms per action make scheduling noise small; sleeps never
// end early, so the measured iteration cannot be shorter than the simulated
// one (the lower bound is exact), and the upper bound only allows noise.
// Also with stages of different micro-batches (see Note [Micro-batch ratios]):
// stage 1 at twice stage 0's rows, so half as many micro-batches of twice
// the modelled time, consuming two of stage 0's each. And under zb-h1, the
// backward split into B and W of half its time each (Note [Split backward]).
TEST(Emulation, MeasuredIterationFollowsTheSimulator) {
  const auto g = zoo::build_graph({"mlp", "tiny"});
  const auto uniform = make_plan(g, request("pipedream", "1f1b", 2, 32, 8, 1));
  ASSERT_EQ(uniform.stages.size(), 2u);
  for (const int variant : {1, 2, 0}) {
    const int ratio = std::max(variant, 1);
    SCOPED_TRACE(variant ? "stage 1 at " + std::to_string(ratio) + "x stage 0's micro-batch" : std::string("zb-h1"));
    auto p = ratio == 1 ? uniform : resized(g, uniform, {8, 8 * ratio});
    schedule::StageGraph costs;
    for (int s = 0; s < 2; ++s) {
      costs.stages.push_back({"s" + std::to_string(s), 1, 0.010 * (s ? ratio : 1), 0.020 * (s ? ratio : 1), 0, 0, {}});
      costs.stages.back().weight_s = 0.010 * (s ? ratio : 1);
    }
    costs.edges.push_back({0, 1, 0.004, 0.004 * ratio});
    if (variant == 0) {
      p.schedule = "zb-h1";
      const auto zb = schedule::make_schedule("zb-h1", costs, p.micro_batch_counts());
      for (auto& st : p.stages) st.actions = schedule::to_string(zb.stages[st.id]);
      ASSERT_TRUE(schedule::splits_backward(zb.stages[1]));
    }
    const auto sched = plan::schedule_of(p);
    const double simulated = schedule::simulate(costs, sched, static_cast<int>(p.mini_batch)).iteration_s;
    ASSERT_GT(simulated, 0.1);  // 4 micro-batches of 30 ms per stage (or 2 of 60), plus transfers
    const int steps = 3;
    std::vector<double> measured(2, 0);
    std::vector<std::string> errors(2);
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          auto world = comm::Group::over_store(store, r, 2, std::chrono::milliseconds(20000));
          executor::StageExecutor ex(g, p, world, executor::Emulation{costs, 1});
          for (int s = 0; s < steps; ++s) {
            const auto t0 = executor::now_us();
            ex.run({}, static_cast<double>(p.mini_batch), {});
            std::vector<at::Tensor> one{torch::zeros({1})};
            world.pg().allreduce(one)->wait();  // as the trainer's per-step all-reduce
            if (s > 0) measured[r] += static_cast<double>(executor::now_us() - t0) / 1e6 / (steps - 1);
          }
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(errors[r], "") << "rank " << r;
      EXPECT_GE(measured[r], 0.98 * simulated) << "rank " << r << ": emulated " << measured[r] << " s";
      EXPECT_LE(measured[r], 1.5 * simulated) << "rank " << r << ": emulated " << measured[r] << " s";
    }
  }
}

}  // namespace
}  // namespace trident::executor
