#include <array>
#include <fstream>

#include <gtest/gtest.h>

#include <set>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "trident/comm/grad_sync.h"
#include "trident/comm/group.h"
#include "trident/comm/store_backend.h"
#include "trident/comm/world.h"
#include "trident/cost/comm.h"
#include "trident/nn/executor.h"
#include "trident/nn/graph_module.h"
#include "trident/zoo/builder.h"
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

TEST(World, ReadsTheJobId) {
  EXPECT_EQ(world_from_env({{"TRIDENT_JOB_ID", "a"}, {"SLURM_JOB_ID", "7"}}).job_id, "a");
  EXPECT_EQ(world_from_env({{"SLURM_JOB_ID", "7"}}).job_id, "7");
  EXPECT_EQ(world_from_env({}).job_id, "");
}

// Note [Free ports]: a rendezvous port lies below the ephemeral range, where
// no outgoing connection or port-0 listener can take it, and was free.
TEST(World, AFreeLocalPortLiesBelowTheEphemeralRange) {
  const auto [low, high] = ephemeral_ports();
  ASSERT_LE(low, high);
  if (low - 1024 < 64) GTEST_SKIP() << "the ephemeral range starts at " << low << ": no room below it";
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    const int port = free_local_port();
    EXPECT_GE(port, 1024);
    EXPECT_LT(port, low);
    seen.insert(port);
  }
  EXPECT_GT(seen.size(), 1u) << "drawn at random, so two jobs rarely try the same port";
}

// Note [Job ids]: a worker of another job that reaches this job's
// rendezvous is refused, naming both jobs, as bad input.
TEST(Group, AWorkerOfAnotherJobIsRefused) {
  WorldInfo a;
  a.rank = 0, a.world_size = 2, a.master_port = free_local_port(), a.job_id = "job-a";
  WorldInfo b = a;
  b.rank = 1, b.job_id = "job-b";
  std::thread host([&] {
    try {
      Group::connect(a, std::chrono::seconds(3));  // waits for a rank 1 that never joins
    } catch (const std::exception&) {
    }
  });
  try {
    Group::connect(b, std::chrono::seconds(3));
    ADD_FAILURE() << "a worker of job-b joined job-a";
  } catch (const CommError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find("rank 1 of job 'job-b' reached the rendezvous of job 'job-a' at 127.0.0.1:"),
              std::string::npos)
        << e.what();
  }
  host.join();
}

// Note [Arrivals]: the ranks that came wait for one that never does longer
// than a rank's own attempt to reach the store (so that rank fails first),
// then fail naming it.
TEST(Group, ARankThatNeverArrivesIsNamedAfterTheOthersWaitedLonger) {
  WorldInfo w;
  w.world_size = 3, w.master_port = free_local_port();
  const auto timeout = std::chrono::seconds(1);
  std::string said[2];
  double waited[2] = {0, 0};
  auto join = [&](int r) {
    WorldInfo mine = w;
    mine.rank = r;
    const auto start = std::chrono::steady_clock::now();
    try {
      Group::connect(mine, timeout);
    } catch (const CommError& e) {
      said[r] = e.what();
    }
    waited[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::thread host(join, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0's store is up
  join(1);
  host.join();
  // Rank 0 names the missing rank; rank 1, whose deadline came later, may
  // instead find rank 0's store gone with it.
  EXPECT_NE(said[0].find("rank 0: rank(s) 2 did not reach the rendezvous at 127.0.0.1:" +
                         std::to_string(w.master_port) + " within 3.5 s"),
            std::string::npos)
      << said[0];
  EXPECT_FALSE(said[1].empty());
  for (int r = 0; r < 2; ++r) EXPECT_GE(waited[r], 1.5) << "rank " << r;  // the connect timeout and half of it again

}

// The processes on this host, which share its cores (Note [Thread defaults]).
TEST(World, ReadsEachLaunchersLocalSize) {
  const std::map<std::string, std::string> master{{"MASTER_ADDR", "n1"}, {"MASTER_PORT", "1"}};
  auto with = [&](std::map<std::string, std::string> env) {
    env.insert(master.begin(), master.end());
    return world_from_env(env).local_size;
  };
  EXPECT_EQ(with({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"}}), 4);
  EXPECT_EQ(with({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "6"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}), 3);
  EXPECT_EQ(with({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_NTASKS_PER_NODE", "2"}}), 2);
  // srun without --ntasks-per-node: this node's entry of the compressed list.
  const std::map<std::string, std::string> slurm{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "7"}, {"SLURM_TASKS_PER_NODE", "2(x3),1"}};
  auto on_node = [&](const char* node) {
    auto env = slurm;
    env["SLURM_NODEID"] = node;
    return with(env);
  };
  EXPECT_EQ(on_node("0"), 2);
  EXPECT_EQ(on_node("2"), 2);
  EXPECT_EQ(on_node("3"), 1);
  // No local count given: every process is taken to be here.
  EXPECT_EQ(with({{"RANK", "0"}, {"WORLD_SIZE", "3"}}), 3);
  EXPECT_EQ(world_from_env({}).local_size, 1);
  expect_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "two"}, {"SLURM_NODEID", "0"},
                {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
               "SLURM_TASKS_PER_NODE='two' is not a list like 2(x3),1");
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

// A model with one large fully connected layer (1024 x 1024).
graph::OpGraph wide_fc() {
  zoo::GraphBuilder b("wide_fc");
  auto x = b.input("x", {{1024}, graph::DType::kFloat32});
  auto h = b.activation("relu", "relu", b.linear("fc", x, 1024));
  auto y = b.input("label", {{}, graph::DType::kInt64}, 8);
  b.cross_entropy("loss", b.linear("head", h, 8), y);
  return b.finish();
}

graph::OpGraph model_graph(const std::string& model) {
  return model == "wide_fc" ? wide_fc() : zoo::build_graph({model, "tiny"});
}

// Forwards every collective to Gloo and counts the bytes of the tensors each
// kind was given: what the sync really launched, independent of its counters.
class CountingGroup final : public c10d::ProcessGroup {
 public:
  explicit CountingGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner)
      : c10d::ProcessGroup(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}
  const std::string getBackendName() const override { return "counting"; }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& t, const c10d::AllreduceOptions& o) override {
    count("allreduce", t);
    return inner_->allreduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& t, const c10d::ReduceOptions& o) override {
    count("reduce", t);
    return inner_->reduce(t, o);
  }
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& t, const c10d::BroadcastOptions& o) override {
    count("broadcast", t);
    return inner_->broadcast(t, o);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out, std::vector<at::Tensor>& in,
                                           const c10d::AllgatherOptions& o) override {
    count("allgather", in);
    return inner_->allgather(out, in, o);
  }
  std::map<std::string, double> bytes;  // per collective kind, over every call

 private:
  void count(const std::string& kind, const std::vector<at::Tensor>& tensors) {
    for (const auto& t : tensors) bytes[kind] += static_cast<double>(t.numel() * t.element_size());
  }
  c10::intrusive_ptr<c10d::ProcessGroup> inner_;
};

// Gives each rank's sync a CountingGroup and keeps them by rank.
struct Counted {
  std::mutex mu;
  std::map<int, c10::intrusive_ptr<CountingGroup>> groups;
  MakeSync wrap(MakeSync make) {
    return [this, make](Group g, NamedParams p) {
      auto c = c10::make_intrusive<CountingGroup>(g.process_group());
      {
        std::lock_guard<std::mutex> lock(mu);
        groups[g.rank()] = c;
      }
      return make(g.with_process_group(c), std::move(p));
    };
  }
};

Run train(const std::string& model, int ranks, int steps, std::int64_t batch, const MakeSync& make) {
  const auto g = model_graph(model);
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
    if (sync) ex.set_observer(sync->observer());
    auto loss = ex.forward({}, fields).at(g.loss()) / static_cast<double>(batch);
    if (sync) sync->arm();
    loss.backward();
    torch::NoGradGuard no_grad;
    auto update = [](const std::string&, torch::Tensor& p, const torch::Tensor& grad) { p.sub_(grad, 0.05); };
    if (sync) {
      sync->finish();
      sync->apply(update);
    } else {
      for (auto& p : m.parameters()) update("", p, p.grad());
    }
    for (auto& p : m.parameters()) p.mutable_grad().zero_();
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

// Every Linear weight by SFB, the rest by all-reduce.
std::map<std::string, std::string> sfb_where_possible(const graph::OpGraph& g) {
  std::map<std::string, std::string> m;
  for (const auto& op : g.ops())
    for (const auto& p : op.params) m[p.name] = cost::sfb_shape(op, p) ? "sfb" : "allreduce";
  return m;
}

TEST_P(AllReduce, ParameterServerEqualsSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  expect_equal(train(model, ranks, 3, 24, [](Group g, NamedParams p) { return make_ps_sync(g, p); }));
}

TEST_P(AllReduce, SfbEqualsSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  const auto g = model_graph(model);
  expect_equal(train(model, ranks, 3, 24, [&](Group grp, NamedParams p) {
    return make_hybrid_sync(grp, p, g, sfb_where_possible(g));
  }));
}

// Methods rotating over the parameters in the order `pick`, so all three run
// side by side; SFB where a parameter cannot take it becomes pick[0].
std::map<std::string, std::string> rotating_methods(const graph::OpGraph& g, const std::array<const char*, 3>& pick) {
  std::map<std::string, std::string> methods;
  int i = 0;
  for (const auto& op : g.ops())
    for (const auto& p : op.params) {
      std::string m = pick[i++ % 3];
      if (m == "sfb" && !cost::sfb_shape(op, p)) m = pick[0];
      methods[p.name] = m;
    }
  return methods;
}

TEST_P(AllReduce, HybridEqualsSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  const auto g = model_graph(model);
  const auto methods = rotating_methods(g, {"ps", "allreduce", "sfb"});
  expect_equal(train(model, ranks, 3, 24, [&](Group grp, NamedParams p) {
    return make_hybrid_sync(grp, p, g, methods);
  }));
}

// Every method over the store backend (the CUDA build's carrier of CPU
// tensors, Note [Backends]): the same weights as one process.
TEST_P(AllReduce, HybridOverTheStoreBackendEqualsSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  const auto g = model_graph(model);
  const auto methods = rotating_methods(g, {"allreduce", "ps", "sfb"});
  auto store = c10::make_intrusive<c10d::HashStore>();
  expect_equal(train(model, ranks, 3, 24, [&](Group grp, NamedParams p) {
    auto pg = store_process_group(store, grp.rank(), grp.size(), grp.timeout());
    return make_hybrid_sync(grp.with_process_group(pg), p, g, methods);
  }));
}

INSTANTIATE_TEST_SUITE_P(Models, AllReduce,
                         ::testing::Combine(::testing::Values("mlp", "cnn", "wide_fc"), ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "_ranks";
                         });

TEST(AllReduceSync, SmallBucketsAndNoWfbpAgreeAndCountBytes) {
  // 4 KiB buckets: many buckets, launched as gradients become ready.
  Counted wrapped;
  auto run = train("mlp", 3, 2, 24, wrapped.wrap([](Group g, NamedParams p) { return make_allreduce_sync(g, p, 4096); }));
  const auto& counting = wrapped.groups;
  expect_equal(run);
  const auto& st = run.stats[0];
  ASSERT_GT(st.events.size(), 2u);
  // WFBP: the first buckets started before backward ended.
  EXPECT_LT(st.events.front().start_s, st.backward_end_s);
  // The last bucket is launched when backward ends, so some sync is exposed.
  EXPECT_GT(st.exposed_s, 0);
  // Bytes: the counters follow what the sync launched. Every parameter's
  // gradient went into the all-reduces once per step, and a ring all-reduce
  // of S bytes moves 2 S (P-1)/P each way.
  double params = 0, counted = 0;
  const auto g = zoo::build_graph({"mlp", "tiny"});
  for (const auto& op : g.ops())
    for (const auto& p : op.params) params += static_cast<double>(p.bytes());
  for (const auto& [name, sent] : st.sent) counted += sent;
  ASSERT_EQ(counting.size(), 3u);
  for (const auto& [rank, group] : counting) {
    EXPECT_DOUBLE_EQ(group->bytes.at("allreduce"), 2 * params) << "rank " << rank;  // 2 steps
    EXPECT_EQ(group->bytes.size(), 1u) << "rank " << rank;
  }
  EXPECT_DOUBLE_EQ(counted, counting.at(0)->bytes.at("allreduce") / 2 * 2.0 * 2 / 3);
  auto off = train("mlp", 2, 2, 24, [](Group g, NamedParams p) { return make_allreduce_sync(g, p, 4096, false); });
  expect_equal(off);
  EXPECT_GE(off.stats[0].events.front().start_s, off.stats[0].backward_end_s);
}

TEST(SfbSync, RebuiltGradientEqualsTheAllReducedOneAndBytesFollowTheFormula) {
  const auto g = wide_fc();
  // One step, then compare the synced gradients themselves.
  auto grads = [&](bool sfb) {
    std::vector<std::map<std::string, torch::Tensor>> out(3);
    train("wide_fc", 3, 1, 24, [&](Group grp, NamedParams p) {
      auto sync = sfb ? make_hybrid_sync(grp, p, g, sfb_where_possible(g)) : make_allreduce_sync(grp, p);
      struct Spy final : GradSync {
        std::unique_ptr<GradSync> inner;
        NamedParams params;
        std::map<std::string, torch::Tensor>* out;
        void arm() override { inner->arm(); }
        void finish() override {
          inner->finish();
          for (auto& [n, t] : params) (*out)[n] = t.grad().clone();
        }
        void apply(const Update& u) override { inner->apply(u); }
        OpObserver observer() override { return inner->observer(); }
        const SyncStats& stats() const override { return inner->stats(); }
        std::string name() const override { return inner->name(); }
      };
      auto spy = std::make_unique<Spy>();
      spy->inner = std::move(sync), spy->params = p, spy->out = &out[grp.rank()];
      return spy;
    });
    return out;
  };
  auto sfb = grads(true), ar = grads(false);
  for (int r = 0; r < 3; ++r)
    for (const auto& [name, t] : ar[r])
      EXPECT_TRUE(torch::allclose(sfb[r].at(name), t, 1e-5, 1e-6)) << "rank " << r << " " << name;
  // Bytes: each rank sends its K = 8 rows of factors (M + N floats) to P - 1 = 2 peers.
  auto run = train("wide_fc", 3, 1, 24, [&](Group grp, NamedParams p) {
    return make_hybrid_sync(grp, p, g, sfb_where_possible(g));
  });
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("fc.weight"), 8.0 * 2 * (1024 + 1024) * 4);
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("head.weight"), 8.0 * 2 * (1024 + 8) * 4);
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("fc.bias"), 2.0 * 1024 * 4 * 2 / 3);  // all-reduce
}

TEST(PsSync, StalenessDelaysPullsReproduciblyAndFlushAgrees) {
  auto stale = [](Group g, NamedParams p) {
    struct Flushing final : GradSync {  // flushes after the last step, as the trainer does
      std::unique_ptr<GradSync> inner;
      int steps = 0, done = 0;
      void arm() override { inner->arm(); }
      void finish() override { inner->finish(); }
      void apply(const Update& u) override {
        inner->apply(u);
        if (++done == steps) inner->flush();
      }
      const SyncStats& stats() const override { return inner->stats(); }
      std::string name() const override { return inner->name(); }
    };
    auto f = std::make_unique<Flushing>();
    f->inner = make_ps_sync(g, p, 1), f->steps = 4;
    return f;
  };
  auto a = train("mlp", 3, 4, 24, stale), b = train("mlp", 3, 4, 24, stale);
  double from_bsp = 0;
  for (const auto& [name, w] : a.single) {
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(torch::equal(a.ranks[r].at(name), a.ranks[0].at(name))) << name << " rank " << r;  // flushed
      EXPECT_TRUE(torch::equal(a.ranks[r].at(name), b.ranks[r].at(name))) << name;  // reproducible
    }
    from_bsp = std::max(from_bsp, (a.ranks[0].at(name) - w).abs().max().item<double>());
  }
  EXPECT_GT(from_bsp, 1e-4);  // stale reads change the result
}

// Bytes this process has handed to write(2)/writev(2) — Gloo's socket writes
// among them — as the kernel counts them (/proc/self/io, all threads).
double written_bytes() {
  std::ifstream io("/proc/self/io");
  std::string key;
  double value = 0;
  while (io >> key >> value)
    if (key == "wchar:") return value;
  ADD_FAILURE() << "/proc/self/io has no wchar line";
  return 0;
}

NamedParams wide_fc_params() {
  NamedParams params;
  const auto g = wide_fc();
  for (const auto& op : g.ops())
    for (const auto& p : op.params) params.emplace_back(p.name, torch::zeros(p.shape));
  return params;
}

// The PS's counters are what the cost model says each rank sends and
// receives, and the bytes Gloo writes to its sockets (counted by the kernel)
// are their sum over the ranks, for P = 2, 3, 4.
TEST(PsSync, BytesOnTheWireEqualTheCostModel) {
  // Gloo's sockets write the bytes; the CUDA build's store backend keeps them in a HashStore here.
  if (backend_names() != "gloo") GTEST_SKIP() << "no sockets to count under " << backend_names();
  const auto params = wide_fc_params();
  for (int ranks : {2, 3, 4}) {
    const auto owners = ps_owners(params, ranks);
    const double before = written_bytes();
    Counted wrapped;
    auto run = train("wide_fc", ranks, 1, 24, wrapped.wrap([](Group g, NamedParams p) { return make_ps_sync(g, p); }));
    const double wire = written_bytes() - before;
    double predicted = 0, formula = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const double bytes = 4.0 * params[i].second.numel();
      const auto traffic = cost::ps_traffic(bytes, 4, ranks, owners[i]);
      for (int r = 0; r < ranks; ++r) {
        EXPECT_DOUBLE_EQ(run.stats[r].sent.at(params[i].first), traffic.sent[r]) << params[i].first << " rank " << r;
        EXPECT_DOUBLE_EQ(run.stats[r].received.at(params[i].first), traffic.received[r]) << params[i].first;
        predicted += traffic.sent[r];
      }
      formula += ranks * cost::ps_bytes(bytes, ranks);
      // Every rank pushed (reduce) and pulled (broadcast) every gradient once.
      for (const auto& [rank, group] : wrapped.groups) {
        EXPECT_DOUBLE_EQ(group->bytes.at("reduce"), group->bytes.at("broadcast"));
      }
    }
    EXPECT_NEAR(formula, predicted, 64 * static_cast<double>(params.size()));  // ps_bytes: the same, owner aside
    // Message headers (48 bytes each) and the connection handshakes are the
    // difference: well under 1% of the 4 MiB weight's traffic.
    EXPECT_GE(wire, predicted) << ranks << " ranks";
    EXPECT_LE(wire, predicted * 1.01) << ranks << " ranks: " << wire - predicted << " bytes more than predicted";
  }
}

}  // namespace
}  // namespace trident::comm

namespace trident::comm {
namespace {

// Messages name world ranks: a subgroup's own numbering means nothing to a user.
TEST(Group, SubgroupMembersAreNamedByWorldRank) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> names(3), errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto world = Group::over_store(store, r, 3, std::chrono::seconds(20));
        // Every rank stays until all are done: a rank leaving early closes its connections.
        auto barrier = [&] {
          std::vector<at::Tensor> one{torch::zeros({1})};
          world.pg().allreduce(one)->wait();
        };
        if (r == 0) {
          try {
            world.subgroup({1, 2}, "stage1");  // not a member: throws before any collective
          } catch (const std::exception& e) {
            errors[r] = e.what();
          }
          barrier();
          return;
        }
        auto sub = world.subgroup({1, 2}, "stage1");
        names[r] = sub.member(0) + " | " + sub.member(1) + " | " + std::to_string(sub.world_rank());
        barrier();
      } catch (const std::exception& e) {
        errors[r] += e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "rank 0 is not in group 'stage1'");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(errors[2], "");
  EXPECT_EQ(names[1], "rank 1 (member 0 of 'stage1') | rank 2 (member 1 of 'stage1') | 1");
  EXPECT_EQ(names[2], "rank 1 (member 0 of 'stage1') | rank 2 (member 1 of 'stage1') | 2");
}

}  // namespace
}  // namespace trident::comm
