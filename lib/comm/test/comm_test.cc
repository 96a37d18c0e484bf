#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <functional>
#include <thread>

#include "trident/comm/grad_sync.h"
#include "trident/comm/world.h"
#include "trident/cost/comm.h"
#include "trident/nn/executor.h"
#include "trident/nn/graph_module.h"
#include "trident/zoo/zoo.h"

namespace trident::comm {
namespace {

void expect_error(const std::map<std::string, std::string>& env, const std::string& needle) {
  try {
    world_from_env(env);
    FAIL() << "expected CommError with " << needle;
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(World, ReadsEachLauncherAndRejectsDisagreement) {
  auto w = world_from_env({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29511"}});
  EXPECT_EQ(w.rank, 2);
  EXPECT_EQ(w.world_size, 4);
  EXPECT_EQ(w.local_rank, 0);
  EXPECT_EQ(w.master_addr, "n1");
  EXPECT_EQ(w.master_port, 29511);
  EXPECT_EQ(w.launcher, "torchrun");
  w = world_from_env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(w.launcher, "mpirun");
  EXPECT_EQ(w.local_rank, 1);
  w = world_from_env({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(w.launcher, "srun");
  EXPECT_EQ(w.rank, 3);
  w = world_from_env({});
  EXPECT_EQ(w.world_size, 1);
  EXPECT_EQ(w.launcher, "none");
  // srun sets SLURM_* and the user's script sets RANK too: they must agree.
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
               "launchers disagree: RANK=0, WORLD_SIZE=2 (torchrun) but SLURM_PROCID=1, SLURM_NTASKS=2 (srun)");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "MASTER_ADDR is missing");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}, "MASTER_PORT is missing");
  expect_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x' is not a non-negative integer");
  expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK=2 must be below WORLD_SIZE=2");
  expect_error({{"RANK", "0"}}, "WORLD_SIZE is missing but RANK is set");
}

using Weights = std::map<std::string, torch::Tensor>;
using MakeSync = std::function<std::unique_ptr<GradSync>(Group, NamedParams)>;

// Data-parallel SGD on `ranks` threads (one Gloo group over a HashStore), the
// global batch split into contiguous row slices, against one process on the
// whole batch. Returns the single-process weights and every rank's.
struct Run {
  Weights single;
  std::vector<Weights> ranks;
  std::vector<SyncStats> stats;
};

Run train(const std::string& model, int ranks, int steps, std::int64_t batch, const MakeSync& make) {
  const auto g = zoo::build_graph({model, "tiny"});
  torch::manual_seed(0);
  nn::GraphModule reference(g);
  auto gen = at::detail::createCPUGenerator(7);
  std::vector<nn::Batch> batches;
  for (int s = 0; s < steps; ++s) batches.push_back(nn::random_batch(g, batch, gen));
  // Modules are built here, on one thread: construction draws from torch's global generator.
  std::vector<std::shared_ptr<nn::GraphModule>> modules;
  for (int r = 0; r <= ranks; ++r) {
    auto m = std::make_shared<nn::GraphModule>(g);
    torch::NoGradGuard no_grad;
    for (const auto& p : reference.named_parameters()) m->named_parameters()[p.key()].copy_(p.value());
    modules.push_back(m);
  }
  auto step = [&](nn::GraphModule& m, const nn::Batch& fields, GradSync* sync) {
    nn::GraphExecutor ex(m, graph::whole_graph(g));
    auto loss = ex.forward({}, fields).at(g.loss()) / static_cast<double>(batch);
    if (sync) sync->arm();
    loss.backward();
    if (sync) sync->finish();
    torch::NoGradGuard no_grad;
    for (auto& p : m.parameters()) {
      p.sub_(p.grad(), 0.05);
      p.mutable_grad().zero_();
    }
  };
  auto weights = [](nn::GraphModule& m) {
    Weights w;
    for (const auto& p : m.named_parameters()) w[p.key()] = p.value().detach().clone();
    return w;
  };
  Run run;
  for (const auto& b : batches) step(*modules[ranks], b, nullptr);
  run.single = weights(*modules[ranks]);
  run.ranks.resize(ranks);
  run.stats.resize(ranks);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto group = Group::over_store(store, r, ranks, std::chrono::seconds(20));
        NamedParams params;
        for (const auto& p : modules[r]->named_parameters()) params.emplace_back(p.key(), p.value());
        auto sync = make(group, params);
        const std::int64_t rows = batch / ranks;
        for (const auto& b : batches) {
          nn::Batch mine;
          for (const auto& [field, t] : b) mine[field] = t.narrow(0, r * rows, rows);
          step(*modules[r], mine, sync.get());
        }
        run.ranks[r] = weights(*modules[r]);
        run.stats[r] = sync->stats();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return run;
}

void expect_equal(const Run& run) {
  for (std::size_t r = 0; r < run.ranks.size(); ++r) {
    ASSERT_EQ(run.ranks[r].size(), run.single.size());
    for (const auto& [name, w] : run.single)
      EXPECT_TRUE(torch::allclose(run.ranks[r].at(name), w, 1e-5, 1e-5))
          << "rank " << r << " " << name << " differs by " << (run.ranks[r].at(name) - w).abs().max().item<double>();
  }
}

class AllReduce : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AllReduce, WeightsEqualSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  auto run = train(model, ranks, 3, 24, [](Group g, NamedParams p) { return make_allreduce_sync(g, p); });
  expect_equal(run);
}

INSTANTIATE_TEST_SUITE_P(Models, AllReduce,
                         ::testing::Combine(::testing::Values("mlp", "cnn"), ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "_ranks";
                         });

TEST(AllReduceSync, SmallBucketsAndNoWfbpAgreeAndCountBytes) {
  // 4 KiB buckets: many buckets, launched as gradients become ready.
  auto run = train("mlp", 3, 2, 24, [](Group g, NamedParams p) { return make_allreduce_sync(g, p, 4096); });
  expect_equal(run);
  const auto& st = run.stats[0];
  ASSERT_GT(st.events.size(), 2u);
  // WFBP: the first buckets started before backward ended.
  EXPECT_LT(st.events.front().start_s, st.backward_end_s);
  EXPECT_GE(st.exposed_s, 0);
  // Bytes: ring all-reduce moves 2 S (P-1)/P each way, per parameter.
  const auto g = zoo::build_graph({"mlp", "tiny"});
  for (const auto& op : g.ops())
    for (const auto& p : op.params)
      EXPECT_DOUBLE_EQ(st.sent.at(p.name), 2.0 * p.bytes() * 2 / 3) << p.name;
  auto off = train("mlp", 2, 2, 24, [](Group g, NamedParams p) { return make_allreduce_sync(g, p, 4096, false); });
  expect_equal(off);
  EXPECT_GE(off.stats[0].events.front().start_s, off.stats[0].backward_end_s);
}

}  // namespace
}  // namespace trident::comm
