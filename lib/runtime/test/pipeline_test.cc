// Graph pipelines equal single-process training (docs/design.md, contract "Synchronous semantics"):
// every rank a thread, one Gloo group over a HashStore, the plan's stages
// run by StageExecutor with their replicas synced by the plan's methods.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <condition_variable>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "trident/comm/store_backend.h"
#include "trident/cost/cluster.h"
#include "trident/cost/cost_model.h"
#include "trident/plan/planner.h"
#include "trident/report/plan_tables.h"
#include "trident/executor/stage_executor.h"
#include "trident/executor/trace.h"
#include "trident/schedule/schedule.h"
#include "trident/schedule/simulator.h"
#include "trident/zoo/zoo.h"
#include "trident/data/dataset.h"

namespace trident::runtime {
namespace {

using Weights = std::map<std::string, torch::Tensor>;

plan::PlanRequest request(const std::string& partitioner, const std::string& schedule, int devices, int mini,
                          int micro, int max_replicas) {
  plan::PlanRequest r;
  r.devices = devices, r.mini_batch = mini, r.micro_batch = micro;
  r.partitioner = partitioner, r.schedule = schedule, r.max_replicas = max_replicas;
  return r;
}

plan::Plan make_plan(const graph::OpGraph& g, const plan::PlanRequest& r) {
  const auto c = cost::load_cluster("cpu-local");
  auto p = plan::Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  plan::validate_plan(p, g);
  return p;
}

// Stages by op-name predicate, in the order given; `replicas` each.
plan::Plan hand_plan(const graph::OpGraph& g, const plan::PlanRequest& r,
                     const std::vector<std::function<bool(const std::string&)>>& groups,
                     const std::vector<int>& replicas) {
  const auto c = cost::load_cluster("cpu-local");
  plan::Planner planner(g, c, cost::analytic_cost_model(c.device), r);
  std::vector<plan::Planner::StageChoice> stages(groups.size());
  for (graph::OpId id = 0; id < g.size(); ++id) {
    std::size_t i = 0;
    while (i + 1 < groups.size() && !groups[i](g.op(id).name)) ++i;
    stages[i].ops.push_back(id);
  }
  for (std::size_t i = 0; i < stages.size(); ++i) stages[i].replicas = replicas[i];
  auto p = planner.assemble(stages, *r.micro_batch, "hand-written");
  plan::validate_plan(p, g);
  return p;
}

struct Result {
  Weights single;
  std::vector<Weights> ranks;  // each rank's stage parameters
  std::vector<std::string> errors;
  std::vector<double> loss;    // per step, summed over the loss stage's replicas
  std::vector<double> single_loss;  // per step, one process (sum over the batch's rows)
  std::vector<std::set<std::string>> fields;  // the dataset fields each rank read
  std::vector<std::set<std::string>> held;    // every parameter each rank's module holds
};

using Update = std::function<void(const std::string&, torch::Tensor&, const torch::Tensor&)>;

// The reference: one process, the whole graph, the same batches and update.
void train_single(const graph::OpGraph& g, nn::GraphModule& m, const std::vector<nn::Batch>& batches,
                  const Update& update, Result& res) {
  nn::GraphExecutor ex(m, graph::whole_graph(g));
  for (const auto& b : batches) {
    auto sum = ex.forward({}, b).at(g.loss());
    res.single_loss.push_back(sum.item<double>());
    auto loss = sum / static_cast<double>(b.begin()->second.size(0));
    loss.backward();
    for (auto& w : m.parameters()) update("", w, w.grad()), w.mutable_grad().zero_();
  }
  for (const auto& q : m.named_parameters()) res.single[q.key()] = q.value().detach().clone();
}

// `over_store`: every message (stage-to-stage transfers, replica sync)
// travels by the store backend, as CPU tensors do in the CUDA build (Note
// [Backends]), matched as `matching` says; `per_direction`: transfers take
// a link per direction, as on GPUs (see Note [Pipeline transfers on GPUs]).
Result train_once(const graph::OpGraph& g, const plan::Plan& p, int steps, double timeout_s, bool over_store,
                  comm::Matching matching, bool per_direction) {
  const int n = p.devices;
  const std::int64_t batch = p.mini_batch;
  // Stage-local state (docs/design.md, contract "The run keeps the plan"): rank r builds only its stage's
  // ops; weights follow from (seed, name), so they start equal to the
  // single process's (modules[n], every op).
  std::vector<std::shared_ptr<nn::GraphModule>> modules;
  for (int r = 0; r < n; ++r) {
    std::set<graph::OpId> ops;
    for (const auto& st : p.stages)
      if (std::find(st.devices.begin(), st.devices.end(), r) != st.devices.end())
        for (const auto& name : st.ops) ops.insert(g.id_of(name));
    modules.push_back(std::make_shared<nn::GraphModule>(g, 7, ops));
  }
  modules.push_back(std::make_shared<nn::GraphModule>(g, 7));
  auto gen = at::detail::createCPUGenerator(11);
  std::vector<nn::Batch> batches;
  for (int s = 0; s < steps; ++s) batches.push_back(data::random_batch(g, batch, gen));
  auto update = [](const std::string&, torch::Tensor& w, const torch::Tensor& grad) {
    torch::NoGradGuard no_grad;
    w.sub_(grad, 0.05);
  };
  Result res;
  train_single(g, *modules[n], batches, update, res);
  res.ranks.resize(n);
  res.errors.resize(n);
  res.loss.assign(steps, 0);
  res.fields.resize(n);
  res.held.resize(n);
  std::mutex mu;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  // Every rank's groups live until every rank is done, also where its messages go by the store
  // and where it failed: a rank that dropped its Gloo context at once closed its sockets while a
  // slower rank was still connecting to it or had not yet reached the wait its test expects, which
  // then failed with a bare "Connection closed by peer" (a hang in 3 of 8 runs on a loaded 2-core
  // machine; later, a receiver's error without the action it waited in, once in ~10 make test runs).
  std::condition_variable all_done;
  int done = 0;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<comm::Group> keep;
      try {
        const auto gloo = comm::Group::over_store(store, r, n,
                                                  std::chrono::milliseconds(static_cast<int>(timeout_s * 1000)));
        keep.push_back(gloo);
        auto world = gloo;
        if (over_store)
          world = gloo.made_by([matching](c10::intrusive_ptr<c10d::Store> s, int rank, int size,
                                           std::chrono::milliseconds timeout) {
            return comm::store_process_group(std::move(s), rank, size, timeout, matching);
          });
        keep.push_back(world);
        StageExecutor ex(*modules[r], p, world, per_direction ? Placement().with_link_per_direction() : Placement());
        auto sync = make_stage_sync(ex, p, world, 25 << 20, 0);
        for (int s = 0; s < steps; ++s) {
          auto source = [&](std::int64_t b, std::int64_t e, const std::set<std::string>& fields) {
            nn::Batch out;
            for (const auto& f : fields) out[f] = batches[s].at(f).slice(0, b, e);
            res.fields[r].insert(fields.begin(), fields.end());
            return out;
          };
          auto out = ex.run(source, static_cast<double>(batch), [&] {
            if (sync) sync->arm();
          });
          if (sync) {
            sync->finish();
            sync->apply(update);
          } else {
            for (auto [name, w] : ex.params())
              if (w.grad().defined()) update(name, w, w.grad());
          }
          for (auto& [name, w] : ex.params())
            if (w.grad().defined()) w.mutable_grad().zero_();
          std::lock_guard<std::mutex> lock(mu);
          res.loss[s] += out.loss_sum;
        }
        if (sync) sync->flush();  // PS pulls land in the next forward, else here (as in the trainer)
        for (const auto& [name, w] : ex.params()) res.ranks[r][name] = w.detach().clone();
        for (const auto& q : modules[r]->named_parameters()) res.held[r].insert(q.key());
      } catch (const std::exception& e) {
        res.errors[r] = e.what();
      }
      std::unique_lock<std::mutex> lock(mu);
      ++done;
      all_done.notify_all();
      all_done.wait(lock, [&] { return done == n; });
    });
  }
  for (auto& t : threads) t.join();
  return res;
}

// A run whose every error is Gloo's TCP transport on loopback ("Connection
// closed by peer", "Connection reset by peer") and nothing else: seen in 2
// of about 10 full `make test` runs (once in a pipeline over the store
// backend, once in mmt's graphpipe pipeline at step 0), never in 25 runs of
// the same test alone under load; not a failure of the code under test.
bool only_transport_errors(const Result& res) {
  bool any = false;
  for (const auto& e : res.errors) {
    if (e.empty()) continue;
    if (e.find("gloo/transport/tcp") == std::string::npos) return false;
    any = true;
  }
  return any;
}

// train_once, run again once when only_transport_errors (said on stderr);
// a second failure of any kind stands.
Result train(const graph::OpGraph& g, const plan::Plan& p, int steps, double timeout_s = 20, bool over_store = false,
             comm::Matching matching = comm::Matching::kByTag, bool per_direction = false) {
  auto res = train_once(g, p, steps, timeout_s, over_store, matching, per_direction);
  if (!only_transport_errors(res)) return res;
  std::cerr << "pipeline_test: Gloo transport error on loopback, running again once:";
  for (const auto& e : res.errors) std::cerr << "\n  " << e;
  std::cerr << std::endl;
  return train_once(g, p, steps, timeout_s, over_store, matching, per_direction);
}

void expect_equal(const Result& res, const plan::Plan& p) {
  for (std::size_t r = 0; r < res.ranks.size(); ++r) EXPECT_EQ(res.errors[r], "") << "rank " << r;
  std::set<std::string> seen;
  for (std::size_t r = 0; r < res.ranks.size(); ++r)
    for (const auto& [name, w] : res.ranks[r]) {
      seen.insert(name);
      EXPECT_TRUE(torch::allclose(w, res.single.at(name), 1e-5, 1e-5))
          << "rank " << r << " " << name << " differs by " << (w - res.single.at(name)).abs().max().item<double>();
    }
  // The loss stage's replicas together report the single process's loss.
  for (std::size_t s = 0; s < res.single_loss.size(); ++s)
    EXPECT_NEAR(res.loss[s], res.single_loss[s], 1e-4 * std::abs(res.single_loss[s]) + 1e-6) << "step " << s;
  // Every parameter trained somewhere (stages may leave devices idle).
  EXPECT_EQ(seen.size(), res.single.size()) << p.to_json().dump();
  // No rank holds a parameter of another stage: what its module holds is
  // exactly what its stage trains.
  for (std::size_t r = 0; r < res.ranks.size(); ++r) {
    std::set<std::string> stage_params;
    for (const auto& [name, w] : res.ranks[r]) stage_params.insert(name);
    EXPECT_EQ(res.held[r], stage_params) << "rank " << r;
  }
}

bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

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

// Fan-out and fan-in: the stem feeds two branch stages, which both feed the rest.
plan::Plan fan_plan(const graph::OpGraph& g) {
  auto in = [](std::initializer_list<const char*> prefixes) {
    std::vector<std::string> ps(prefixes.begin(), prefixes.end());
    return [ps](const std::string& n) {
      for (const auto& p : ps)
        if (starts(n, p)) return true;
      return false;
    };
  };
  const auto p = hand_plan(g, request("graphpipe", "graph-1f1b", 4, 16, 4, 0),
                           {in({"block1.b1.", "block1.b2."}), in({"block1.b3.", "block1.b4."}),
                            [](const std::string& n) { return n == "image" || starts(n, "stem") || n == "pool1"; },
                            [](const std::string&) { return true; }},
                           {1, 1, 1, 1});
  return p;
}

TEST(Pipeline, FanOutFanInStagesEqualSingleProcess) {
  const auto g = zoo::build_graph({"inception", "tiny"});
  const auto p = fan_plan(g);
  ASSERT_EQ(p.stages.size(), 4u);
  int fan_out = 0;
  for (const auto& e : p.edges) fan_out += e.from == p.edges.front().from;
  EXPECT_GE(fan_out, 2) << "the stem stage feeds both branch stages";
  expect_equal(train(g, p, 3), p);
}

// Inception in two stages of 3 and 2 replicas: every edge is split into overlapping pieces.
plan::Plan widths_plan(const graph::OpGraph& g) {
  return hand_plan(g, request("graphpipe", "1f1b", 5, 12, 6, 0),
                   {[](const std::string& n) { return n == "image" || starts(n, "stem") || n == "pool1" || starts(n, "block1"); },
                    [](const std::string&) { return true; }},
                   {3, 2});
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

// See Note [Micro-batch ratios in pieces]: the same plan with each stage's own
// micro-batch size (a schedule made for the sizes).
plan::Plan resized(const graph::OpGraph& g, plan::Plan p, const std::vector<int>& sizes) {
  for (auto& st : p.stages) st.micro_batch = sizes.at(static_cast<std::size_t>(st.id)), st.actions.clear();
  plan::validate_plan(p, g);
  const auto c = cost::load_cluster("cpu-local");
  plan::PlanRequest r;
  r.devices = p.devices, r.mini_batch = p.mini_batch, r.schedule = p.schedule;
  plan::Planner(g, c, cost::analytic_cost_model(c.device), r).predict(p);
  return p;
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
  std::vector<int> fan_sizes;  // the stem 4, the branch stages 8 and 2, the join 16
  for (const auto& st : fan.stages) {
    const bool stem = std::any_of(st.ops.begin(), st.ops.end(), [](const std::string& n) { return starts(n, "stem"); });
    const bool join = std::any_of(st.ops.begin(), st.ops.end(), [&](const std::string& n) { return inception.id_of(n) == inception.loss(); });
    const bool first = std::any_of(st.ops.begin(), st.ops.end(), [](const std::string& n) { return starts(n, "block1.b1."); });
    fan_sizes.push_back(stem ? 4 : join ? 16 : first ? 8 : 2);
  }
  const auto widths = widths_plan(inception);
  std::vector<int> widths_sizes{widths.stages[0].devices.size() == 3 ? 6 : 12, widths.stages[0].devices.size() == 3 ? 12 : 6};
  auto planned = make_plan(mmt, request("graphpipe", "graph-1f1b", 4, 16, 4, 1));
  std::vector<int> mmt_sizes;
  for (const auto& st : planned.stages) mmt_sizes.push_back(st.id % 2 ? 8 : 2);
  auto schedules = schedule::schedule_names();
  schedules.insert(schedules.end(), schedule::zero_bubble_names().begin(), schedule::zero_bubble_names().end());
  for (const auto& schedule : schedules) {
    std::vector<std::pair<const graph::OpGraph*, plan::Plan>> plans;
    const auto& zb = schedule::zero_bubble_names();
    const bool split = std::find(zb.begin(), zb.end(), schedule) != zb.end();
    auto with = [&](const graph::OpGraph& g, plan::Plan p, const std::vector<int>& sizes) {
      p.schedule = schedule;
      for (auto& [name, method] : p.grad_sync)  // SFB does not take a split backward (plan.cc, check_sfb_order)
        if (split && method == "sfb") method = "allreduce";
      plans.emplace_back(&g, resized(g, p, sizes));
    };
    with(candle, uno, uno_sizes);
    with(inception, fan, fan_sizes);
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
class CountingClock final : public DeviceClock {
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
  std::vector<TraceLog> traces(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        nn::GraphModule module(g, 7);
        StageExecutor ex(module, p, comm::Group::over_store(store, r, 2, std::chrono::milliseconds(20000)));
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

}  // namespace
}  // namespace trident::runtime

namespace trident::runtime {
namespace {

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
          StageExecutor ex(g, p, world, Emulation{costs, 1});
          for (int s = 0; s < steps; ++s) {
            const auto t0 = now_us();
            ex.run({}, static_cast<double>(p.mini_batch), {});
            std::vector<at::Tensor> one{torch::zeros({1})};
            world.pg().allreduce(one)->wait();  // as the trainer's per-step all-reduce
            if (s > 0) measured[r] += static_cast<double>(now_us() - t0) / 1e6 / (steps - 1);
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
}  // namespace trident::runtime
