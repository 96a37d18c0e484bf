// See Note [Row store] in row_store.h.
#include "trident/sync/row_store.h"

#include <chrono>
#include <string>

#include "trident/base/text.h"

namespace trident::sync {

RowStats& RowStats::operator+=(const RowStats& o) {
  local_rows += o.local_rows, remote_rows += o.remote_rows;
  bytes_received += o.bytes_received, bytes_sent += o.bytes_sent;
  seconds += o.seconds;
  return *this;
}

RowStore::RowStore(comm::Group group, std::vector<std::int64_t> bounds, torch::Tensor shard)
    : group_(std::move(group)), bounds_(std::move(bounds)), shard_(std::move(shard)) {
  const auto r = static_cast<std::size_t>(group_.rank());
  if (bounds_.size() != static_cast<std::size_t>(group_.size()) + 1 || bounds_.front() != 0 || shard_.dim() != 2 ||
      shard_.size(0) != bounds_[r + 1] - bounds_[r])
    throw comm::CommError("row store: member " + std::to_string(r) + "'s shard " + c10::str(shard_.sizes()) +
                          " does not hold its rows of bounds " + c10::str(c10::IntArrayRef(bounds_)));
  shard_ = shard_.contiguous();
}

int RowStore::owner(std::int64_t id) const {
  const auto it = std::upper_bound(bounds_.begin(), bounds_.end(), id);
  return static_cast<int>(it - bounds_.begin()) - 1;
}

RowStats RowStore::take_stats() {
  auto s = stats_;
  stats_ = {};
  return s;
}

void RowStore::fail(const std::string& what, const std::exception& e) const {
  const auto lost = group_.diagnose();
  throw comm::CommError(group_.member(group_.rank()) + ": row store pull " + std::to_string(calls_) + ", " + what +
                        " failed" + (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e));
}

// out[q] to member q (nothing to itself); returns what each sent, in_rows[q] rows shaped like `like`.
std::vector<torch::Tensor> RowStore::exchange(const std::vector<torch::Tensor>& out,
                                              const std::vector<std::int64_t>& in_rows, const torch::Tensor& like,
                                              const char* what) {
  const int p = group_.size();
  std::vector<std::int64_t> out_split, in_split;
  std::vector<torch::Tensor> parts;
  std::int64_t total_in = 0;
  for (int q = 0; q < p; ++q) {
    out_split.push_back(out[static_cast<std::size_t>(q)].size(0));
    in_split.push_back(in_rows[static_cast<std::size_t>(q)]);
    total_in += in_rows[static_cast<std::size_t>(q)];
    parts.push_back(out[static_cast<std::size_t>(q)]);
  }
  auto sent = torch::cat(parts).contiguous();
  auto shape = like.sizes().vec();
  shape[0] = total_in;
  auto got = torch::empty(shape, like.options());
  try {
    group_.pg().alltoall_base(got, sent, in_split, out_split)->wait(group_.timeout());
  } catch (const std::exception& e) {
    fail(what, e);
  }
  stats_.bytes_sent += static_cast<std::int64_t>(sent.nbytes());
  stats_.bytes_received += static_cast<std::int64_t>(got.nbytes());
  std::vector<torch::Tensor> in;
  std::int64_t at = 0;
  for (int q = 0; q < p; ++q) in.push_back(got.narrow(0, at, in_split[static_cast<std::size_t>(q)])), at += in_split[static_cast<std::size_t>(q)];
  return in;
}

torch::Tensor RowStore::pull(const torch::Tensor& ids) {
  const auto start = std::chrono::steady_clock::now();
  ++calls_;
  const int p = group_.size(), me = group_.rank();
  const auto flat = ids.to(torch::kCPU, torch::kInt64).reshape({-1});
  if (flat.numel() && (flat.min().item<std::int64_t>() < 0 || flat.max().item<std::int64_t>() >= rows()))
    throw comm::CommError("row store: a pull asks for row " +
                          std::to_string(flat.min().item<std::int64_t>() < 0 ? flat.min().item<std::int64_t>()
                                                                             : flat.max().item<std::int64_t>()) +
                          " of a table of " + std::to_string(rows()) + " rows");
  // Sorted distinct ids: each owner's are one contiguous run, in owner order.
  const auto [unique, inverse, counts_unused] = torch::_unique2(flat, /*sorted=*/true, /*return_inverse=*/true);
  (void)counts_unused;
  const auto* u = unique.data_ptr<std::int64_t>();
  std::vector<std::int64_t> begin(static_cast<std::size_t>(p) + 1, 0);
  for (int q = 0; q < p; ++q)
    begin[static_cast<std::size_t>(q) + 1] =
        std::lower_bound(u, u + unique.numel(), bounds_[static_cast<std::size_t>(q) + 1]) - u;
  auto segment = [&](int q) {
    return unique.narrow(0, begin[static_cast<std::size_t>(q)],
                         begin[static_cast<std::size_t>(q) + 1] - begin[static_cast<std::size_t>(q)]);
  };
  std::vector<torch::Tensor> rows_of(static_cast<std::size_t>(p));
  rows_of[static_cast<std::size_t>(me)] = shard_.index_select(0, segment(me) - bounds_[static_cast<std::size_t>(me)]);
  stats_.local_rows += segment(me).numel();
  if (p > 1) {
    // How many ids each member wants from each: counts[q] to member q.
    std::vector<torch::Tensor> counts;
    for (int q = 0; q < p; ++q) counts.push_back(torch::full({1}, q == me ? 0 : segment(q).numel(), torch::kInt64));
    const auto asked = exchange(counts, std::vector<std::int64_t>(static_cast<std::size_t>(p), 1), counts[0], "count exchange");
    std::vector<std::int64_t> asked_rows;
    for (const auto& a : asked) asked_rows.push_back(a.item<std::int64_t>());
    std::vector<torch::Tensor> want;
    for (int q = 0; q < p; ++q) want.push_back(q == me ? unique.narrow(0, 0, 0) : segment(q));
    const auto wanted = exchange(want, asked_rows, unique, "id exchange");
    // Serve: the rows each member asked for, from this shard.
    std::vector<torch::Tensor> serve;
    std::vector<std::int64_t> coming;
    for (int q = 0; q < p; ++q) {
      serve.push_back(shard_.index_select(0, wanted[static_cast<std::size_t>(q)] - bounds_[static_cast<std::size_t>(me)]));
      coming.push_back(q == me ? 0 : segment(q).numel());
    }
    const auto got = exchange(serve, coming, shard_, "row exchange");
    for (int q = 0; q < p; ++q)
      if (q != me) rows_of[static_cast<std::size_t>(q)] = got[static_cast<std::size_t>(q)], stats_.remote_rows += coming[static_cast<std::size_t>(q)];
  }
  const auto out = torch::cat(rows_of).index_select(0, inverse);
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

RowStore::Pushed RowStore::push(const torch::Tensor& ids, const torch::Tensor& values) {
  const auto start = std::chrono::steady_clock::now();
  ++calls_;
  const int p = group_.size(), me = group_.rank();
  const auto flat = ids.to(torch::kCPU, torch::kInt64).reshape({-1});
  const auto v = values.to(torch::kCPU).contiguous();
  if (flat.numel() && (flat.min().item<std::int64_t>() < 0 || flat.max().item<std::int64_t>() >= rows()))
    throw comm::CommError("row store: a push names a row outside the table of " + std::to_string(rows()) + " rows");
  const auto [unique, inverse, counts_unused] = torch::_unique2(flat, /*sorted=*/true, /*return_inverse=*/true);
  (void)counts_unused;
  const auto mine = torch::zeros({unique.numel(), v.size(1)}, v.options()).index_add_(0, inverse, v);
  const auto* u = unique.data_ptr<std::int64_t>();
  std::vector<std::int64_t> begin(static_cast<std::size_t>(p) + 1, 0);
  for (int q = 0; q < p; ++q)
    begin[static_cast<std::size_t>(q) + 1] =
        std::lower_bound(u, u + unique.numel(), bounds_[static_cast<std::size_t>(q) + 1]) - u;
  auto part = [&](const torch::Tensor& t, int q) {
    return t.narrow(0, begin[static_cast<std::size_t>(q)], begin[static_cast<std::size_t>(q) + 1] - begin[static_cast<std::size_t>(q)]);
  };
  const auto lo = bounds_[static_cast<std::size_t>(me)];
  std::vector<torch::Tensor> got_ids(static_cast<std::size_t>(p)), got_values(static_cast<std::size_t>(p));
  got_ids[static_cast<std::size_t>(me)] = part(unique, me), got_values[static_cast<std::size_t>(me)] = part(mine, me);
  if (p > 1) {
    std::vector<torch::Tensor> counts, out_ids, out_values;
    for (int q = 0; q < p; ++q) {
      const bool self = q == me;
      counts.push_back(torch::full({1}, self ? 0 : part(unique, q).numel(), torch::kInt64));
      out_ids.push_back(self ? unique.narrow(0, 0, 0) : part(unique, q));
      out_values.push_back(self ? mine.narrow(0, 0, 0) : part(mine, q));
    }
    const auto asked = exchange(counts, std::vector<std::int64_t>(static_cast<std::size_t>(p), 1), counts[0], "push count exchange");
    std::vector<std::int64_t> coming;
    for (const auto& a : asked) coming.push_back(a.item<std::int64_t>());
    const auto ids_in = exchange(out_ids, coming, unique, "push id exchange");
    const auto values_in = exchange(out_values, coming, mine, "push row exchange");
    for (int q = 0; q < p; ++q)
      if (q != me) got_ids[static_cast<std::size_t>(q)] = ids_in[static_cast<std::size_t>(q)], got_values[static_cast<std::size_t>(q)] = values_in[static_cast<std::size_t>(q)];
  }
  // Sums per row, in member order.
  const auto all_ids = torch::cat(got_ids) - lo, all_values = torch::cat(got_values);
  const auto [rows_out, at, counts2_unused] = torch::_unique2(all_ids, /*sorted=*/true, /*return_inverse=*/true);
  (void)counts2_unused;
  Pushed out{rows_out, torch::zeros({rows_out.numel(), v.size(1)}, v.options()).index_add_(0, at, all_values)};
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace trident::sync
