// Gradient sync (all-reduce with WFBP, parameter server, SFB, the hybrid)
// equals single-process training, and moves the bytes its formulas say.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <array>
#include <cmath>
#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
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
#include "trident/data/dataset.h"

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
  std::vector<double> worst_read_staleness;  // by rank, over its steps
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

// wide_fc with its first layer as tools/export captures an nn.Linear
// (see Note [Captured Linear layers] in cost/comm.cc).
graph::OpGraph captured_fc() {
  auto doc = wide_fc().to_json();
  doc["capture"] = {{"by", "test"}, {"format", "aten/1"}, {"torch", "1.13"}};
  for (auto& op : doc["ops"])
    if (op["name"] == "fc") {
      using J = nlohmann::json;
      op["kind"] = "aten";
      op["attrs"] = {{"capture", "aten/1"},
                     {"calls", J::array({J{{"op", "aten::t"}, {"overload", ""}, {"args", J::array({J{{"param", "fc.weight"}}})}},
                                         J{{"op", "aten::addmm"},
                                           {"overload", ""},
                                           {"args", J::array({J{{"param", "fc.bias"}}, J{{"in", 0}}, J{{"call", 0}}})}}})},
                     {"result", {{"call", 1}}}};
    }
  return graph::OpGraph::from_json(doc);
}

graph::OpGraph model_graph(const std::string& model) {
  if (model == "captured_fc") return captured_fc();
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
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<std::int64_t>& out_splits,
                                               std::vector<std::int64_t>& in_splits,
                                               const c10d::AllToAllOptions& o) override {
    count("alltoall", {in});
    ++alltoalls;  // before the bytes leave: a peer cannot have them earlier
    return inner_->alltoall_base(out, in, out_splits, in_splits, o);
  }
  std::map<std::string, double> bytes;  // per collective kind, over every call
  std::atomic<int> alltoalls{0};

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

// `before_step(rank, step)`, when given, runs on each rank's thread before each of its steps.
using StepHook = std::function<void(int rank, int step)>;
Run train(const std::string& model, int ranks, int steps, std::int64_t batch, const MakeSync& make,
          const StepHook& before_step = {}, graph::Precision precision = graph::Precision::kFp32) {
  const auto g = model_graph(model);
  torch::manual_seed(0);
  nn::GraphModule reference(g);
  auto gen = at::detail::createCPUGenerator(7);
  std::vector<nn::Batch> batches;
  for (int s = 0; s < steps; ++s) batches.push_back(data::random_batch(g, batch, gen));
  // Modules are built here, on one thread: construction draws from torch's global generator.
  std::vector<std::shared_ptr<nn::GraphModule>> modules;
  for (int r = 0; r <= ranks; ++r) {
    auto m = std::make_shared<nn::GraphModule>(g);
    m->set_precision(precision);
    torch::NoGradGuard no_grad;
    for (const auto& p : reference.named_parameters()) m->named_parameters()[p.key()].copy_(p.value());
    modules.push_back(m);
  }
  auto step = [&](nn::GraphModule& m, const nn::Batch& fields, GradSync* sync) {
    nn::GraphExecutor ex(m, graph::whole_graph(g));
    if (sync) ex.set_observer(sync->observer()), ex.set_gate(sync->gate());
    auto loss = ex.forward({}, fields).at(g.loss()) / static_cast<double>(batch);
    auto update = [](const std::string&, torch::Tensor& p, const torch::Tensor& grad) {
      torch::NoGradGuard no_grad;
      p.sub_(grad, 0.05);
    };
    if (sync) sync->set_update(update), sync->arm();  // a PS may update during backward
    loss.backward();
    torch::NoGradGuard no_grad;
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
  run.worst_read_staleness.assign(ranks, 0);
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
        for (std::size_t s = 0; s < batches.size(); ++s) {
          if (before_step) before_step(r, static_cast<int>(s));
          const auto& b = batches[s];
          nn::Batch mine;
          for (const auto& [field, t] : b) mine[field] = t.narrow(0, r * rows, rows);
          step(*modules[r], mine, sync.get());
          run.worst_read_staleness[r] = std::max(run.worst_read_staleness[r], sync->stats().read_staleness);
        }
        sync->flush();  // as the trainer does before checkpoints and at the end
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

// Under bf16 the factors move in bf16 and the GEMM runs in bf16, as the
// layer's own backward does on the whole batch: after one step every SFB
// weight equals one process's bitwise (the biases, all-reduced over the
// ranks' slices, are rounded per slice and may differ in bf16's last place),
// and the factors' bytes are half of fp32's.
TEST(Sfb, Bf16FactorsGiveOneProcesssGradientOnTheWholeBatch) {
  const auto g = model_graph("wide_fc");
  const auto methods = sfb_where_possible(g);
  auto make = [&](Group grp, NamedParams p) { return make_hybrid_sync(grp, p, g, methods); };
  const auto bf16 = train("wide_fc", 3, 1, 24, make, {}, graph::Precision::kBf16);
  const auto fp32 = train("wide_fc", 3, 1, 24, make);
  for (const auto& [name, method] : methods) {
    if (method != "sfb") continue;
    for (int r = 0; r < 3; ++r)
      EXPECT_TRUE(torch::equal(bf16.ranks[r].at(name), bf16.single.at(name)))
          << name << " rank " << r << " differs by " << (bf16.ranks[r].at(name) - bf16.single.at(name)).abs().max().item<double>();
    EXPECT_DOUBLE_EQ(2 * bf16.stats[0].sent.at(name), fp32.stats[0].sent.at(name)) << name;
  }
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
// tensors, see Note [Backends]): the same weights as one process.
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
                         ::testing::Combine(::testing::Values("mlp", "cnn", "inception", "wide_fc"), ::testing::Values(2, 3, 4)),
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

// See Note [Captured Linear layers]: SFB takes an ATen-captured nn.Linear as it
// takes the zoo's linear op, and trains to the single process's weights.
TEST(SfbSync, TakesCapturedLinearLayers) {
  const auto g = captured_fc();
  const auto methods = sfb_where_possible(g);
  EXPECT_EQ(methods.at("fc.weight"), "sfb");
  EXPECT_EQ(methods.at("fc.bias"), "allreduce");
  auto run = train("captured_fc", 3, 3, 24, [&](Group grp, NamedParams p) { return make_hybrid_sync(grp, p, g, methods); });
  expect_equal(run);
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("fc.weight"), 8.0 * 2 * (1024 + 1024) * 4);  // factors, not the gradient
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
        double grad_square_sum() override { return inner->grad_square_sum(); }
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

// See Note [Staleness]: with one member slowed down, the others run ahead by
// up to s clocks and never more. A member's clock is how many iterations it
// has pushed (counted by the decorator before the bytes leave); a member
// starting step c must see every other member at clock c - s or later.
TEST(PsSync, StaleSynchronousMembersRunAheadBySClocksAtMost) {
  for (int s : {0, 2}) {
    Counted wrapped;
    std::mutex mu;
    int lead = 0;
    std::string broken;
    auto run = train("mlp", 3, 10, 24, wrapped.wrap([s](Group g, NamedParams p) { return make_ps_sync(g, p, {s}); }),
                     [&](int rank, int step) {
                       if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(40));
                       std::lock_guard<std::mutex> lock(mu);
                       for (const auto& [other, group] : wrapped.groups) {
                         const int behind = step - group->alltoalls.load();
                         lead = std::max(lead, behind);
                         if (other != rank && behind > s)
                           broken += "rank " + std::to_string(rank) + " started step " + std::to_string(step) +
                                     " with rank " + std::to_string(other) + " at clock " +
                                     std::to_string(group->alltoalls.load()) + "; ";
                       }
                     });
    EXPECT_EQ(broken, "") << "staleness " << s;
    EXPECT_EQ(lead, s) << "staleness " << s << ": the fast members should reach the bound";
    // What the reads missed (SyncStats::read_staleness): never more than s,
    // and s itself for the members that ran ahead of the slow one.
    const double worst = *std::max_element(run.worst_read_staleness.begin(), run.worst_read_staleness.end());
    EXPECT_EQ(worst, s) << "staleness " << s;
    for (const auto& [name, w] : run.single)
      for (int r = 1; r < 3; ++r)
        EXPECT_TRUE(torch::equal(run.ranks[r].at(name), run.ranks[0].at(name))) << name << " rank " << r;  // flushed
    if (s == 0) expect_equal(run);
  }
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

// One PS iteration on `ranks` threads over Gloo for parameters of `shapes`
// (gradients all ones): the bytes Gloo wrote to its sockets and, per rank,
// how many elements it updated as a server.
struct PsRound {
  double wire = 0;
  std::vector<std::int64_t> served;
  std::int64_t elements = 0;
};
PsRound ps_round(const std::vector<std::vector<std::int64_t>>& shapes, int ranks, PsOptions options = {}) {
  PsRound out;
  out.served.assign(ranks, 0);
  for (const auto& s : shapes) out.elements += c10::multiply_integers(s);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::string> errors(ranks);
  std::vector<std::optional<Group>> groups(ranks);
  std::mutex mu;
  {  // connections first: their handshakes are not the PS's bytes
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] { groups[r] = Group::over_store(store, r, ranks, std::chrono::seconds(20)); });
    for (auto& t : threads) t.join();
  }
  std::vector<std::unique_ptr<GradSync>> syncs(ranks);
  std::vector<NamedParams> params(ranks);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          auto t = torch::zeros(shapes[i]).requires_grad_();
          t.mutable_grad() = torch::ones(shapes[i]);
          params[r].emplace_back("p" + std::to_string(i), t);
        }
        syncs[r] = make_ps_sync(*groups[r], params[r], options);  // makes the pull group: connections again
      });
    for (auto& t : threads) t.join();
  }
  const double before = written_bytes();
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        syncs[r]->arm();
        syncs[r]->finish();
        syncs[r]->apply([&, r](const std::string&, torch::Tensor& p, const torch::Tensor& g) {
          std::lock_guard<std::mutex> lock(mu);
          out.served[r] += p.numel();
          p.sub_(g);
        });
        syncs[r]->flush();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  out.wire = written_bytes() - before;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    for (const auto& [name, t] : params[r])  // every element updated once, by its server, and pulled
      EXPECT_TRUE(torch::equal(t, -torch::ones_like(t) * ranks)) << name << " on rank " << r;
  }
  return out;
}

// See Note [Sharded parameter server]: per replica and iteration the PS sends
// and receives 2·S·(P−1)/P bytes for S bytes of parameters (what a ring
// all-reduce moves), counted at the sockets for P = 2, 3, 4, for one large
// weight and for many small tensors packed into one bucket; and every
// replica serves, so holds optimizer state for, 1/P of the elements (± the
// bucket's short last block).
TEST(PsSync, BytesOnTheWireAndServedShareAreOnePth) {
  // Gloo's sockets write the bytes; the CUDA build's store backend keeps them in a HashStore here.
  if (backend_names() != "gloo") GTEST_SKIP() << "no sockets to count under " << backend_names();
  std::vector<std::vector<std::int64_t>> small;
  for (int i = 0; i < 40; ++i) small.push_back({17 + 31 * i});
  small.push_back({64, 9});
  for (const auto& [what, shapes] : {std::pair{"a 4096 x 4096 weight", std::vector<std::vector<std::int64_t>>{{4096, 4096}}},
                                     std::pair{"41 small tensors", small}}) {
    for (int ranks : {2, 3, 4}) {
      const auto round = ps_round(shapes, ranks);
      const double S = 4.0 * static_cast<double>(round.elements);
      const double each_way = 2 * S * (ranks - 1) / ranks;  // per replica
      // The sockets carry what every replica sends (= what they all receive).
      EXPECT_NEAR(round.wire, ranks * each_way, 0.05 * ranks * each_way) << what << ", " << ranks << " ranks";
      std::int64_t total = 0;
      for (int r = 0; r < ranks; ++r) {
        total += round.served[r];
        EXPECT_NEAR(static_cast<double>(round.served[r]), static_cast<double>(round.elements) / ranks, ranks)
            << what << ", rank " << r << " of " << ranks;
      }
      EXPECT_EQ(total, round.elements) << what;
    }
  }
}

// See Note [Push dtype]: bf16 pushes carry half the push bytes at the
// sockets (pulls stay fp32: 3/4 of the fp32 round's bytes in all), and the
// counters say so.
TEST(PsSync, Bf16PushesHalveThePushBytes) {
  if (backend_names() != "gloo") GTEST_SKIP() << "no sockets to count under " << backend_names();
  for (int ranks : {2, 3}) {
    const auto round = ps_round({{1024, 1024}}, ranks, {0, kDefaultBucketBytes, nullptr, torch::kBFloat16});
    const double S = 4.0 * static_cast<double>(round.elements);
    const double each_way = 1.5 * S * (ranks - 1) / ranks;  // per replica: a bf16 push and an fp32 pull
    EXPECT_NEAR(round.wire, ranks * each_way, 0.05 * ranks * each_way) << ranks << " ranks";
    EXPECT_DOUBLE_EQ(cost::ps_bytes(S, ranks, 0.5), each_way);
  }
}

// See Note [Push dtype]: each worker's gradient is rounded to bf16 once and
// the server sums the pieces in fp32 in member order — bitwise, on 3 ranks;
// the fp32 sum of the same gradients is another result.
TEST(PsSync, Bf16PushesRoundOnceAndSumInFp32) {
  constexpr int kRanks = 3;
  auto gen = at::detail::createCPUGenerator(11);
  std::vector<torch::Tensor> grads;
  for (int r = 0; r < kRanks; ++r) grads.push_back(torch::randn({37, 5}, gen));
  auto bf16_sum = grads[0].to(torch::kBFloat16).to(torch::kFloat);
  for (int r = 1; r < kRanks; ++r) bf16_sum.add_(grads[r].to(torch::kBFloat16));
  const auto fp32_sum = grads[0] + grads[1] + grads[2];
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<torch::Tensor> result(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = Group::over_store(store, r, kRanks, std::chrono::seconds(20));
        auto w = torch::zeros({37, 5}).requires_grad_();
        w.mutable_grad() = grads[r].clone();
        auto sync = make_ps_sync(group, {{"w", w}}, {0, kDefaultBucketBytes, nullptr, torch::kBFloat16});
        sync->arm();
        sync->finish();
        sync->apply([](const std::string&, torch::Tensor& p, const torch::Tensor& g) { p.sub_(g); });
        sync->flush();
        result[r] = w.detach().clone();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_TRUE(torch::equal(result[r], -bf16_sum)) << "rank " << r << " differs by "
                                                    << (result[r] + bf16_sum).abs().max().item<double>();
    EXPECT_FALSE(torch::equal(result[r], -fp32_sum)) << "rank " << r << ": the push was not rounded to bf16";
  }
}

// See Note [Sharded parameter server]: the counters say what the formula says,
// and the sync launched one push (alltoall) and one pull (allgather) of
// equal blocks per bucket.
TEST(PsSync, CountersFollowTheFormula) {
  Counted wrapped;
  auto run = train("wide_fc", 3, 1, 24, wrapped.wrap([](Group g, NamedParams p) { return make_ps_sync(g, p); }));
  expect_equal(run);
  const auto g = wide_fc();
  double params = 0;
  for (const auto& op : g.ops())
    for (const auto& p : op.params) {
      params += static_cast<double>(p.bytes());
      EXPECT_DOUBLE_EQ(run.stats[0].sent.at(p.name), 2.0 * static_cast<double>(p.bytes()) * 2 / 3) << p.name;
    }
  for (const auto& [rank, group] : wrapped.groups) {
    // One bucket (under 25 MiB), padded to 3 equal blocks.
    const double padded = 4.0 * 3 * std::ceil(params / 4 / 3);
    EXPECT_DOUBLE_EQ(group->bytes.at("alltoall"), padded) << "rank " << rank;
    EXPECT_EQ(group->alltoalls.load(), 1);
  }
  // The trace: push, update and pull of the bucket.
  std::set<std::string> names;
  for (const auto& e : run.stats[0].events) names.insert(e.name);
  EXPECT_TRUE(names.count("ps push bucket 0") && names.count("ps update bucket 0") && names.count("ps pull bucket 0"));
}

// arm() opens the iteration that apply() closes: a second arm() before it
// is a bug of the caller's loop, named, not a read past the rounds kept.
TEST(PsSync, ArmTwiceWithoutApplyIsRefused) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto group = Group::over_store(store, 0, 1, std::chrono::seconds(20));
  auto w = torch::zeros({4, 3}).requires_grad_();
  w.mutable_grad() = torch::ones({4, 3});
  auto sync = make_ps_sync(group, {{"w", w}});
  sync->arm();
  sync->finish();
  try {
    sync->arm();
    FAIL() << "a second arm() was accepted";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("arm() twice without apply()"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::comm
