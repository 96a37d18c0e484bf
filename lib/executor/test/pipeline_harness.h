// The harness of the pipeline tests: plans pinned on the cpu-local preset,
// every rank a thread over one Gloo group (or the store backend), and one
// process as the reference (docs/design.md, contract "Synchronous semantics").
#pragma once

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <condition_variable>
#include <thread>

#include "trident/comm/store_backend.h"
#include "trident/cost/cluster.h"
#include "trident/cost/cost_model.h"
#include "trident/data/dataset.h"
#include "trident/executor/stage_executor.h"
#include "trident/executor/tied_params.h"
#include "trident/executor/trace.h"
#include "trident/nn/random.h"
#include "trident/planner/planner.h"
#include "trident/report/plan_tables.h"
#include "trident/schedule/schedule.h"
#include "trident/schedule/simulator.h"
#include "trident/zoo/zoo.h"

namespace trident::executor::test {

using Weights = std::map<std::string, torch::Tensor>;

using Weights = std::map<std::string, torch::Tensor>;

inline planner::PlanRequest request(const std::string& partitioner, const std::string& schedule, int devices, int mini,
                                    int micro, int max_replicas) {
  planner::PlanRequest r;
  r.devices = devices, r.mini_batch = mini, r.micro_batch = micro;
  r.partitioner = partitioner, r.schedule = schedule, r.max_replicas = max_replicas;
  return r;
}

inline plan::Plan make_plan(const graph::OpGraph& g, const planner::PlanRequest& r) {
  const auto c = cost::load_cluster("cpu-local");
  auto p = planner::Planner(g, c, cost::analytic_cost_model(c.device), r).plan();
  plan::validate_plan(p, g);
  return p;
}

// Stages by op-name predicate, in the order given; `replicas` each.
inline plan::Plan hand_plan(const graph::OpGraph& g, const planner::PlanRequest& r,
                            const std::vector<std::function<bool(const std::string&)>>& groups,
                            const std::vector<int>& replicas) {
  const auto c = cost::load_cluster("cpu-local");
  planner::Planner planner(g, c, cost::analytic_cost_model(c.device), r);
  std::vector<planner::Planner::StageChoice> stages(groups.size());
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
  std::vector<std::set<std::pair<std::int64_t, std::int64_t>>> rows;  // the dataset rows [b, e) each rank read
  std::vector<std::int64_t> bytes_sent;  // stage-to-stage bytes each rank sent, all steps
  std::vector<int> versions;  // under a delay: the most weight versions each rank held in flight
};

// TRIDENT_TEST_IGNORE_DELAY=1: the pipeline runs synchronously though its
// plan is delayed (the reference stays delayed) — the check that the
// delayed tests can fail.
inline bool ignore_delay() {
  const char* v = std::getenv("TRIDENT_TEST_IGNORE_DELAY");
  return v && std::string(v) == "1";
}

using Update = std::function<void(const std::string&, torch::Tensor&, const torch::Tensor&)>;

// The reference: one process, the whole graph, the same batches and update.
// Random ops (dropout) draw by (kRandomSeed, step, micro-batch) in both
// (see Note [Random ops] in nn/random.h); one process runs one micro-batch.
constexpr std::uint64_t kRandomSeed = 3;

// With `delay` (Note [Delayed pipelines] in schedule/delayed.h), PipeDream-2BW's
// rule written out on plain copies: step t's gradient at W(t − 1) (W(−1) =
// W(0)) updates W(t).
inline void train_single(const graph::OpGraph& g, nn::GraphModule& m, const std::vector<nn::Batch>& batches,
                  const Update& update, Result& res, bool delay = false) {
  nn::GraphExecutor ex(m, graph::whole_graph(g));
  auto weights = [&] {
    std::vector<torch::Tensor> w;
    for (auto& p : m.parameters()) w.push_back(p.detach().clone());
    return w;
  };
  auto set = [&](const std::vector<torch::Tensor>& w) {
    torch::NoGradGuard no_grad;
    auto ps = m.parameters();
    for (std::size_t i = 0; i < ps.size(); ++i) ps[i].copy_(w[i]);
  };
  auto previous = weights();
  for (std::size_t s = 0; s < batches.size(); ++s) {
    const auto& b = batches[s];
    const auto current = weights();
    if (delay) set(previous);
    nn::RandomScope random(nn::RandomKey{kRandomSeed, static_cast<std::int64_t>(s), 0});
    auto sum = ex.forward({}, b).at(g.loss());
    res.single_loss.push_back(sum.item<double>());
    auto loss = sum / nn::loss_divisor(g.op(g.loss()), b.at("label"));  // see Note [Loss scale]
    loss.backward();
    if (delay) set(current);
    for (auto& w : m.parameters()) update("", w, w.grad()), w.mutable_grad().zero_();
    previous = current;
  }
  for (const auto& q : m.named_parameters()) res.single[q.key()] = q.value().detach().clone();
}

// `over_store`: every message (stage-to-stage transfers, replica sync)
// travels by the store backend, as CPU tensors do in the CUDA build (Note
// [Backends]), matched as `matching` says; `per_direction`: transfers take
// a link per direction, as on GPUs (see Note [Pipeline transfers on GPUs]).
// `after`, when given, runs on every rank once it has trained (every rank
// calls it: it may run the stages' collective evaluation).
using AfterTraining = std::function<void(executor::StageExecutor&, int rank)>;

inline Result train_once(const graph::OpGraph& g, const plan::Plan& p, int steps, double timeout_s, bool over_store,
                         comm::Matching matching, bool per_direction, const nn::Batch* given = nullptr,
                         const AfterTraining* after = nullptr) {
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
  for (int s = 0; s < steps; ++s) batches.push_back(given ? *given : data::random_batch(g, batch, gen));
  auto update = [](const std::string&, torch::Tensor& w, const torch::Tensor& grad) {
    torch::NoGradGuard no_grad;
    w.sub_(grad, 0.05);
  };
  Result res;
  const bool delay = p.pipeline_delay > 0 && !ignore_delay();
  train_single(g, *modules[n], batches, update, res, p.pipeline_delay > 0);
  res.ranks.resize(n);
  res.errors.resize(n);
  res.loss.assign(steps, 0);
  res.fields.resize(n);
  res.held.resize(n);
  res.rows.resize(n);
  res.bytes_sent.assign(n, 0);
  res.versions.assign(n, 0);
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
        auto run_plan = p;
        if (!delay) run_plan.pipeline_delay = 0;
        executor::StageExecutor ex(*modules[r], run_plan, world, per_direction ? executor::Placement().with_link_per_direction() : executor::Placement());
        executor::TiedSync tied(p, g, world, ex.params());  // see Note [Tied parameters], as the trainer
        auto sync = executor::make_stage_sync(ex, p, world, 25 << 20, 0, tied.names());
        // See Note [Weight versions]: a delayed stage's update writes around the version counters.
        const Update step_update = delay ? executor::WeightVersions::unseen(update) : Update(update);
        for (int s = 0; s < steps; ++s) {
          ex.set_random_key(kRandomSeed, s);
          ex.set_drain(s + 1 == steps);
          auto source = [&](std::int64_t b, std::int64_t e, const std::set<std::string>& fields) {
            nn::Batch out;
            const int at = s + (b >= batch ? 1 : 0);  // rows of the next batch: the next mini-batch's forwards
            const auto off = at > s ? batch : 0;
            for (const auto& f : fields) out[f] = batches.at(at).at(f).slice(0, b - off, e - off);
            res.fields[r].insert(fields.begin(), fields.end());
            res.rows[r].insert({b - off, e - off});
            return out;
          };
          auto out = ex.run(source, nn::loss_divisor(g.op(g.loss()), batches[s].at("label")), [&] {
            if (sync) sync->arm();
          });
          if (delay) ex.begin_update();
          tied.all_reduce();
          if (sync) {
            sync->finish();
            sync->apply(step_update);
            if (delay) sync->flush();  // PS pulls land in the new version's buffer
          } else {
            for (auto [name, w] : ex.params())
              if (w.grad().defined()) step_update(name, w, w.grad());
          }
          for (auto& [name, w] : ex.params())
            if (w.grad().defined()) w.mutable_grad().zero_();
          std::lock_guard<std::mutex> lock(mu);
          res.loss[s] += out.loss_sum;
        }
        if (sync) sync->flush();  // PS pulls land in the next forward, else here (as in the trainer)
        for (const auto& [name, w] : ex.params()) res.ranks[r][name] = w.detach().clone();
        res.versions[r] = ex.most_versions();
        res.bytes_sent[r] = ex.bytes_sent();
        if (after) (*after)(ex, r);
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
inline bool only_transport_errors(const Result& res) {
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
inline Result train(const graph::OpGraph& g, const plan::Plan& p, int steps, double timeout_s = 20, bool over_store = false,
                    comm::Matching matching = comm::Matching::kByTag, bool per_direction = false,
                    const nn::Batch* given = nullptr, const AfterTraining* after = nullptr) {
  auto res = train_once(g, p, steps, timeout_s, over_store, matching, per_direction, given, after);
  if (!only_transport_errors(res)) return res;
  std::cerr << "pipeline_test: Gloo transport error on loopback, running again once:";
  for (const auto& e : res.errors) std::cerr << "\n  " << e;
  std::cerr << std::endl;
  return train_once(g, p, steps, timeout_s, over_store, matching, per_direction, given, after);
}

inline void expect_equal(const Result& res, const plan::Plan& p) {
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

inline bool starts(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Fan-out and fan-in: the stem feeds two branch stages, which both feed the rest.
inline plan::Plan fan_plan(const graph::OpGraph& g) {
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

// The fan plan's stages their own micro-batch sizes: the stem 4, the branch
// stages 8 and 2, the join 16 (see Note [Micro-batch ratios]).
inline std::vector<int> fan_sizes(const graph::OpGraph& g, const plan::Plan& fan) {
  std::vector<int> sizes;
  for (const auto& st : fan.stages) {
    auto any = [&](const std::function<bool(const std::string&)>& is) { return std::any_of(st.ops.begin(), st.ops.end(), is); };
    const bool stem = any([](const std::string& n) { return starts(n, "stem"); });
    const bool join = any([&](const std::string& n) { return g.id_of(n) == g.loss(); });
    const bool first = any([](const std::string& n) { return starts(n, "block1.b1."); });
    sizes.push_back(stem ? 4 : join ? 16 : first ? 8 : 2);
  }
  return sizes;
}

// Inception in two stages of 3 and 2 replicas: every edge is split into overlapping pieces.
inline plan::Plan widths_plan(const graph::OpGraph& g) {
  return hand_plan(g, request("graphpipe", "1f1b", 5, 12, 6, 0),
                   {[](const std::string& n) { return n == "image" || starts(n, "stem") || n == "pool1" || starts(n, "block1"); },
                    [](const std::string&) { return true; }},
                   {3, 2});
}

// See Note [Unequal micro-batches in pieces]: the same plan with each stage's own
// micro-batch size (a schedule made for the sizes).
inline plan::Plan resized(const graph::OpGraph& g, plan::Plan p, const std::vector<int>& sizes) {
  for (auto& st : p.stages) st.micro_batch = sizes.at(static_cast<std::size_t>(st.id)), st.actions.clear();
  plan::validate_plan(p, g);
  const auto c = cost::load_cluster("cpu-local");
  planner::PlanRequest r;
  r.devices = p.devices, r.mini_batch = p.mini_batch, r.schedule = p.schedule;
  planner::Planner(g, c, cost::analytic_cost_model(c.device), r).predict(p);
  return p;
}

}  // namespace trident::executor::test
