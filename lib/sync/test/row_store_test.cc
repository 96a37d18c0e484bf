// RowStore (Note [Row store]): a pull of any rows equals index_select on the
// whole table, across owners, duplicates and empty requests; a member that
// leaves mid-pull is named.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <optional>
#include <thread>

#include "trident/sync/row_store.h"

namespace trident::sync {
namespace {

struct Stores {
  std::vector<std::optional<comm::Group>> groups;
  std::vector<std::unique_ptr<RowStore>> stores;
};

Stores make_stores(const torch::Tensor& table, int members, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  Stores s;
  s.groups.resize(static_cast<std::size_t>(members));
  s.stores.resize(static_cast<std::size_t>(members));
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::int64_t> bounds{0};  // even ranges, the first ones a row longer
  for (int r = 0; r < members; ++r) bounds.push_back(bounds.back() + table.size(0) / members + (r < table.size(0) % members));
  std::vector<std::thread> threads;
  for (int r = 0; r < members; ++r)
    threads.emplace_back([&, r] {
      s.groups[r] = comm::Group::over_store(store, r, members, timeout);
      const auto lo = bounds[static_cast<std::size_t>(r)], hi = bounds[static_cast<std::size_t>(r) + 1];
      s.stores[r] = std::make_unique<RowStore>(*s.groups[r], bounds, table.narrow(0, lo, hi - lo).clone());
    });
  for (auto& t : threads) t.join();
  return s;
}

// Each member pulls its own list, concurrently (a collective).
std::vector<torch::Tensor> pull_all(Stores& s, const std::vector<torch::Tensor>& ids) {
  std::vector<torch::Tensor> out(ids.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ids.size(); ++r) threads.emplace_back([&, r] { out[r] = s.stores[r]->pull(ids[r]); });
  for (auto& t : threads) t.join();
  return out;
}

TEST(RowStore, PullEqualsIndexSelectAcrossOwnersDuplicatesAndEmptyRequests) {
  const auto table = torch::randn({23, 5}, torch::TensorOptions().dtype(torch::kFloat32));
  for (int members : {1, 2, 3}) {
    auto s = make_stores(table, members);
    std::vector<torch::Tensor> ids;
    for (int r = 0; r < members; ++r) ids.push_back(torch::randint(0, 23, {17 + 3 * r}, torch::kInt64));
    ids[0] = torch::tensor({22, 0, 22, 11, 5, 5, 0}, torch::kInt64);  // duplicates, the first and last rows
    if (members > 1) ids[1] = torch::empty({0}, torch::kInt64);        // asks for nothing, still serves
    const auto got = pull_all(s, ids);
    for (int r = 0; r < members; ++r) {
      // Bitwise: rows are copied, never computed.
      EXPECT_TRUE(torch::equal(got[r], table.index_select(0, ids[r]))) << members << " members, member " << r;
      EXPECT_EQ(got[r].size(1), 5);
    }
    // Member 0 asked for 4 distinct rows; a row it owns is read in place, the others pulled.
    const auto st = s.stores[0]->take_stats();
    EXPECT_EQ(st.local_rows + st.remote_rows, 4);
    const auto mine = s.stores[0]->bounds()[1];
    EXPECT_EQ(st.local_rows, (torch::tensor({22, 0, 11, 5}, torch::kInt64) < mine).sum().item<std::int64_t>()) << members;
    EXPECT_GE(st.bytes_received, st.remote_rows * 5 * 4);  // the rows, besides counts and ids
    if (members == 1) EXPECT_EQ(st.bytes_received, 0);
  }
}

TEST(RowStore, ManyPullsInARowAndEveryRowOnce) {
  const auto table = torch::arange(40 * 3, torch::kFloat32).reshape({40, 3});
  auto s = make_stores(table, 3);
  for (int round = 0; round < 4; ++round) {
    std::vector<torch::Tensor> ids;
    for (int r = 0; r < 3; ++r) ids.push_back(torch::randperm(40, torch::kInt64).narrow(0, 0, 10 * round + r));
    const auto got = pull_all(s, ids);
    for (int r = 0; r < 3; ++r) EXPECT_TRUE(torch::equal(got[r], table.index_select(0, ids[r])));  // Bitwise: copies
  }
}

TEST(RowStore, AMemberThatLeavesMidPullIsNamed) {
  const auto table = torch::randn({12, 2});
  auto s = make_stores(table, 2, std::chrono::milliseconds(1500));
  std::string error;
  std::thread other([&] { s.groups[1].reset(), s.stores[1].reset(); });  // member 1 goes away
  other.join();
  try {
    s.stores[0]->pull(torch::tensor({0, 11}, torch::kInt64));
  } catch (const comm::CommError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("row store pull 1"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 0"), std::string::npos) << error;
}

TEST(RowStore, RefusesAShardThatIsNotItsRangeAndAnIdOutsideTheTable) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto g = comm::Group::over_store(store, 0, 1, std::chrono::seconds(5));
  EXPECT_THROW(RowStore(g, {0, 10}, torch::zeros({9, 2})), comm::CommError);
  RowStore s(g, {0, 10}, torch::zeros({10, 2}));
  EXPECT_THROW(s.pull(torch::tensor({10}, torch::kInt64)), comm::CommError);
  EXPECT_EQ(s.pull(torch::empty({0}, torch::kInt64)).sizes(), (std::vector<std::int64_t>{0, 2}));
}

}  // namespace
}  // namespace trident::sync

namespace trident::sync {
namespace {

// push: every member's rows reach their owners, summed per row.
TEST(RowStore, PushSumsEveryMembersRowsAtTheirOwners) {
  const auto table = torch::zeros({10, 1});
  for (int members : {1, 2, 3}) {
    auto s = make_stores(table, members);
    std::vector<torch::Tensor> ids, values;
    for (int r = 0; r < members; ++r) {
      ids.push_back(torch::tensor({9, 0, 9, r + 3}, torch::kInt64));
      values.push_back(torch::tensor({{1.0f}, {2.0f}, {4.0f}, {8.0f * (r + 1)}}));
    }
    std::vector<RowStore::Pushed> got(static_cast<std::size_t>(members));
    std::vector<std::thread> threads;
    for (int r = 0; r < members; ++r) threads.emplace_back([&, r] { got[r] = s.stores[r]->push(ids[r], values[r]); });
    for (auto& t : threads) t.join();
    auto whole = torch::zeros({10});  // what one process would sum
    for (int r = 0; r < members; ++r) whole.index_add_(0, ids[r], values[r].squeeze(1));
    auto seen = torch::zeros({10});
    for (int r = 0; r < members; ++r) {
      const auto lo = s.stores[r]->bounds()[r];
      seen.index_add_(0, got[r].rows + lo, got[r].sums.squeeze(1));
      EXPECT_TRUE(got[r].rows.numel() == 0 || got[r].rows.max().item<std::int64_t>() < s.stores[r]->shard().size(0));
    }
    EXPECT_TRUE(torch::equal(seen, whole)) << members << " members";  // Bitwise: sums of small integers, exact in float32
  }
}

}  // namespace
}  // namespace trident::sync
