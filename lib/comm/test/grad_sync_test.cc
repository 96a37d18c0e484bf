// Gradient sync (all-reduce with WFBP, parameter server, SFB, the hybrid)
// equals single-process training, and moves the bytes its formulas say.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <array>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
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
