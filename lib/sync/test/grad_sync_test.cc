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

#include "trident/sync/grad_sync.h"
#include "trident/comm/group.h"
#include "trident/comm/store_backend.h"
#include "trident/comm/world.h"
#include "trident/cost/network.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/graph_module.h"
#include "trident/zoo/builder.h"
#include "trident/zoo/zoo.h"
#include "trident/data/dataset.h"
#include "sync_harness.h"

namespace trident::sync {
namespace {

using namespace test;  // NOLINT: the harness
class AllReduce : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AllReduce, WeightsEqualSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  auto run = train(model, ranks, 3, 24, [](comm::Group g, NamedParams p) { return make_allreduce_sync(g, p); });
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
  expect_equal(train(model, ranks, 3, 24, [](comm::Group g, NamedParams p) { return make_ps_sync(g, p); }));
}

TEST_P(AllReduce, SfbEqualsSingleProcessTraining) {
  const auto& [model, ranks] = GetParam();
  const auto g = model_graph(model);
  expect_equal(train(model, ranks, 3, 24, [&](comm::Group grp, NamedParams p) {
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
  auto make = [&](comm::Group grp, NamedParams p) { return make_hybrid_sync(grp, p, g, methods); };
  const auto bf16 = train("wide_fc", 3, 1, 24, make, {}, graph::Precision::kBf16);
  const auto fp32 = train("wide_fc", 3, 1, 24, make);
  for (const auto& [name, method] : methods) {
    if (method != "sfb") continue;
    for (int r = 0; r < 3; ++r)
      // Bitwise: in this process both are one bf16 product over the same 24 rows in the same order (xᵀg in
      // one process's backward, gᵀx from the gathered factors here): each element one dot product of the same
      // 24 bf16 products, k within one block of any kernel. Seen equal on AVX512-BF16, AMX-BF16 and emulated
      // bf16 (qemu-x86_64 -cpu Haswell).
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
  expect_equal(train(model, ranks, 3, 24, [&](comm::Group grp, NamedParams p) {
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
  expect_equal(train(model, ranks, 3, 24, [&](comm::Group grp, NamedParams p) {
    auto pg = comm::store_process_group(store, grp.rank(), grp.size(), grp.timeout());
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
  auto run = train("mlp", 3, 2, 24, wrapped.wrap([](comm::Group g, NamedParams p) { return make_allreduce_sync(g, p, 4096); }));
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
  auto off = train("mlp", 2, 2, 24, [](comm::Group g, NamedParams p) { return make_allreduce_sync(g, p, 4096, false); });
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
  auto run = train("captured_fc", 3, 3, 24, [&](comm::Group grp, NamedParams p) { return make_hybrid_sync(grp, p, g, methods); });
  expect_equal(run);
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("fc.weight"), 8.0 * 2 * (1024 + 1024) * 4);  // factors, not the gradient
}

TEST(SfbSync, RebuiltGradientEqualsTheAllReducedOneAndBytesFollowTheFormula) {
  const auto g = wide_fc();
  // One step, then compare the synced gradients themselves.
  auto grads = [&](bool sfb) {
    std::vector<std::map<std::string, torch::Tensor>> out(3);
    train("wide_fc", 3, 1, 24, [&](comm::Group grp, NamedParams p) {
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
  auto run = train("wide_fc", 3, 1, 24, [&](comm::Group grp, NamedParams p) {
    return make_hybrid_sync(grp, p, g, sfb_where_possible(g));
  });
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("fc.weight"), 8.0 * 2 * (1024 + 1024) * 4);
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("head.weight"), 8.0 * 2 * (1024 + 8) * 4);
  EXPECT_DOUBLE_EQ(run.stats[0].sent.at("fc.bias"), 2.0 * 1024 * 4 * 2 / 3);  // all-reduce
}

}  // namespace
}  // namespace trident::sync
