// The parameter server (Note [Sharded parameter server]): bounded
// staleness, bytes on the wire, bf16 pushes, and pieces that keep its
// buffers bounded (Note [PS pieces]).
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cmath>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "sync_harness.h"
#include "trident/sync/grad_sync.h"
#include "trident/comm/group.h"
#include "trident/comm/world.h"
#include "trident/cost/network.h"

namespace trident::sync {
namespace {

using namespace test;  // NOLINT: the harness

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
    auto run = train("mlp", 3, 10, 24, wrapped.wrap([s](comm::Group g, NamedParams p) { return make_ps_sync(g, p, {s}); }),
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
        // Bitwise: every rank applies the values it pulled from the same servers with the same elementwise
        // update in this process: replicas are copies.
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
  std::vector<std::optional<comm::Group>> groups(ranks);
  std::mutex mu;
  {  // connections first: their handshakes are not the PS's bytes
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] { groups[r] = comm::Group::over_store(store, r, ranks, std::chrono::seconds(20)); });
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
      // Bitwise: small integers (-1 per rank), exact in float32 on any kernel.
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
  if (comm::backend_names() != "gloo") GTEST_SKIP() << "no sockets to count under " << comm::backend_names();
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
  if (comm::backend_names() != "gloo") GTEST_SKIP() << "no sockets to count under " << comm::backend_names();
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
        auto group = comm::Group::over_store(store, r, kRanks, std::chrono::seconds(20));
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
    // Bitwise: the server's sum and bf16_sum are the same elementwise fp32 additions in member order; one
    // IEEE addition rounds alike on every CPU.
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
  auto run = train("wide_fc", 3, 1, 24, wrapped.wrap([](comm::Group g, NamedParams p) { return make_ps_sync(g, p); }));
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
  auto group = comm::Group::over_store(store, 0, 1, std::chrono::seconds(20));
  auto w = torch::zeros({4, 3}).requires_grad_();
  w.mutable_grad() = torch::ones({4, 3});
  auto sync = make_ps_sync(group, {{"w", w}});
  sync->arm();
  sync->finish();
  try {
    sync->arm();
    FAIL() << "a second arm() was accepted";
  } catch (const comm::CommError& e) {
    EXPECT_NE(std::string(e.what()).find("arm() twice without apply()"), std::string::npos) << e.what();
  }
}

// See Note [PS pieces]: with buckets of 256 KiB and room for one piece in
// flight, wide_fc's 4 MiB weight moves in 17 pieces a direction, and 3
// ranks still train to one process's weights, while the buffers the PS
// takes stay within the budget and one piece over it (a pull launched ahead
// of the pieces in flight) — not the bucket-sized buffers per bucket an
// unbounded PS keeps.
TEST(PsSync, PiecesKeepTheBuffersWithinTheBudgetAndTrainAsOneProcess) {
  const auto g = wide_fc();
  constexpr std::int64_t kBucket = 256 << 10, kBudget = 512 << 10;
  for (auto push : {torch::kFloat, torch::kBFloat16}) {
    auto run = train("wide_fc", 3, 3, 24, [&](comm::Group grp, NamedParams p) {
      return make_ps_sync(grp, p, {0, kBucket, &g, push, kBudget});
    });
    if (push == torch::kFloat) expect_equal(run);  // bf16 pushes round the gradients (see Note [Push dtype])
    const std::int64_t piece = 3 * (kBucket / 4 / 3) * 4;  // P rows of a block's chunk, fp32
    for (int r = 0; r < 3; ++r) {
      EXPECT_GT(run.stats[r].buffer_bytes, 0) << "rank " << r;
      EXPECT_LE(run.stats[r].buffer_bytes, kBudget + 2 * piece) << "rank " << r << ", push " << push;
      // Bitwise: replicas apply the same pulled values with the same update in this process: copies.
      for (const auto& [name, w] : run.ranks[0]) EXPECT_TRUE(torch::equal(run.ranks[r].at(name), w)) << name;
    }
  }
}

// Room for one piece: every push and pull of inception's 4 KiB buckets waits
// for the piece before it, on 4 ranks with one of them slow, in BSP and
// under staleness 2 — no member waits for a piece another has not launched
// (see Note [PS pieces]), and BSP gives one process's weights.
TEST(PsSync, OnePieceInFlightNeitherDeadlocksNorChangesTheWeights) {
  const auto g = model_graph("inception");
  for (int s : {0, 2}) {
    auto run = train(
        "inception", 4, 4, 24, [&](comm::Group grp, NamedParams p) { return make_ps_sync(grp, p, {s, 4096, &g, torch::kFloat, 1}); },
        [](int rank, int) {
          if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        });
    if (s == 0) expect_equal(run);
    for (int r = 1; r < 4; ++r)
      for (const auto& [name, w] : run.ranks[0])
        // Bitwise: replicas apply the same pulled values with the same update in this process: copies.
        EXPECT_TRUE(torch::equal(run.ranks[r].at(name), w)) << name << " on rank " << r << ", staleness " << s;
  }
}

}  // namespace
}  // namespace trident::sync
