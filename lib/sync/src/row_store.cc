// See Note [Row store] in row_store.h.
#include "trident/sync/row_store.h"

#include <algorithm>
#include <tuple>
#include <string>

#include "trident/base/text.h"

namespace trident::sync {

RowStats& RowStats::operator+=(const RowStats& o) {
  local_rows += o.local_rows, remote_rows += o.remote_rows, bytes_received += o.bytes_received;
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

RowStats RowStore::take_stats() {
  auto s = stats_;
  stats_ = {};
  return s;
}

void RowStore::fail(const std::string& what, const std::exception& e) const {
  const auto lost = group_.diagnose();
  throw comm::CommError(group_.member(group_.rank()) + ": row store " + call_ + " " + std::to_string(calls_) + ", " +
                        what + " failed" + (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e));
}

torch::Tensor RowStore::Runs::of(const torch::Tensor& t, int q) const {
  const auto b = begin[static_cast<std::size_t>(q)], e = begin[static_cast<std::size_t>(q) + 1];
  return t.narrow(0, b, e - b);
}

RowStore::Runs RowStore::by_owner(const torch::Tensor& ids, const char* call) const {
  const auto flat = ids.to(torch::kCPU, torch::kInt64).reshape({-1});
  if (flat.numel()) {
    const auto lo = flat.min().item<std::int64_t>(), hi = flat.max().item<std::int64_t>();
    if (lo < 0 || hi >= rows())
      throw comm::CommError("row store: a " + std::string(call) + " names row " + std::to_string(lo < 0 ? lo : hi) +
                            " of a table of " + std::to_string(rows()) + " rows");
  }
  // Sorted distinct ids: each owner's are one contiguous run, in owner order.
  Runs r;
  std::tie(r.unique, r.inverse, std::ignore) = torch::_unique2(flat, /*sorted=*/true, /*return_inverse=*/true);
  const auto* u = r.unique.data_ptr<std::int64_t>();
  r.begin.assign(static_cast<std::size_t>(group_.size()) + 1, 0);
  for (std::size_t q = 0; q < static_cast<std::size_t>(group_.size()); ++q)
    r.begin[q + 1] = std::lower_bound(u, u + r.unique.numel(), bounds_[q + 1]) - u;
  return r;
}

std::vector<std::int64_t> RowStore::trade_counts(const std::vector<std::int64_t>& sends) {
  std::vector<torch::Tensor> counts;
  for (auto n : sends) counts.push_back(torch::full({1}, n, torch::kInt64));
  const auto got = exchange(counts, std::vector<std::int64_t>(sends.size(), 1), counts[0], "count exchange");
  std::vector<std::int64_t> out;
  for (const auto& g : got) out.push_back(g.item<std::int64_t>());
  return out;
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
  stats_.bytes_received += static_cast<std::int64_t>(got.nbytes());
  std::vector<torch::Tensor> in;
  std::int64_t at = 0;
  for (int q = 0; q < p; ++q) in.push_back(got.narrow(0, at, in_split[static_cast<std::size_t>(q)])), at += in_split[static_cast<std::size_t>(q)];
  return in;
}

torch::Tensor RowStore::pull(const torch::Tensor& ids) {
  ++calls_, call_ = "pull";
  const int p = group_.size(), me = group_.rank();
  const auto lo = bounds_[static_cast<std::size_t>(me)];
  const auto r = by_owner(ids, "pull");
  std::vector<torch::Tensor> rows_of(static_cast<std::size_t>(p));
  rows_of[static_cast<std::size_t>(me)] = shard_.index_select(0, r.of(r.unique, me) - lo);
  stats_.local_rows += r.of(r.unique, me).numel();
  if (p > 1) {
    std::vector<std::int64_t> wants;  // how many ids this member wants from each
    std::vector<torch::Tensor> want;
    for (int q = 0; q < p; ++q) {
      want.push_back(q == me ? r.unique.narrow(0, 0, 0) : r.of(r.unique, q));
      wants.push_back(want.back().numel());
    }
    const auto wanted = exchange(want, trade_counts(wants), r.unique, "id exchange");
    // Serve: the rows each member asked for, from this shard.
    std::vector<torch::Tensor> serve;
    for (int q = 0; q < p; ++q) serve.push_back(shard_.index_select(0, wanted[static_cast<std::size_t>(q)] - lo));
    const auto got = exchange(serve, wants, shard_, "row exchange");
    for (int q = 0; q < p; ++q)
      if (q != me) rows_of[static_cast<std::size_t>(q)] = got[static_cast<std::size_t>(q)], stats_.remote_rows += wants[static_cast<std::size_t>(q)];
  }
  return torch::cat(rows_of).index_select(0, r.inverse);
}

RowStore::Pushed RowStore::push(const torch::Tensor& ids, const torch::Tensor& values) {
  ++calls_, call_ = "push";
  const int p = group_.size(), me = group_.rank();
  const auto v = values.to(torch::kCPU).contiguous();
  const auto r = by_owner(ids, "push");
  const auto mine = torch::zeros({r.unique.numel(), v.size(1)}, v.options()).index_add_(0, r.inverse, v);
  std::vector<torch::Tensor> got_ids(static_cast<std::size_t>(p)), got_values(static_cast<std::size_t>(p));
  got_ids[static_cast<std::size_t>(me)] = r.of(r.unique, me), got_values[static_cast<std::size_t>(me)] = r.of(mine, me);
  if (p > 1) {
    std::vector<std::int64_t> sends;
    std::vector<torch::Tensor> out_ids, out_values;
    for (int q = 0; q < p; ++q) {
      const bool self = q == me;
      out_ids.push_back(self ? r.unique.narrow(0, 0, 0) : r.of(r.unique, q));
      out_values.push_back(self ? mine.narrow(0, 0, 0) : r.of(mine, q));
      sends.push_back(out_ids.back().numel());
    }
    const auto coming = trade_counts(sends);
    const auto ids_in = exchange(out_ids, coming, r.unique, "id exchange");
    const auto values_in = exchange(out_values, coming, mine, "row exchange");
    for (int q = 0; q < p; ++q)
      if (q != me) got_ids[static_cast<std::size_t>(q)] = ids_in[static_cast<std::size_t>(q)], got_values[static_cast<std::size_t>(q)] = values_in[static_cast<std::size_t>(q)];
  }
  // Sums per row, in member order.
  const auto all_ids = torch::cat(got_ids) - bounds_[static_cast<std::size_t>(me)], all_values = torch::cat(got_values);
  torch::Tensor rows_out, at;
  std::tie(rows_out, at, std::ignore) = torch::_unique2(all_ids, /*sorted=*/true, /*return_inverse=*/true);
  return {rows_out, torch::zeros({rows_out.numel(), v.size(1)}, v.options()).index_add_(0, at, all_values)};
}

}  // namespace trident::sync
