// RowStore: a table of rows (a graph's node features) sharded over a
// group's members by contiguous ranges — Poseidon's key-value store with
// rows for keys, as DistDGL keeps features (Note [Row store]).
//
// Note [Row store]
// ~~~~~~~~~~~~~~~~
// Member p holds rows [bounds[p], bounds[p+1]) — its shard, the only copy
// anywhere — and serves them to the others. A graph in METIS order
// (`@metis=P`) makes each range about one METIS part, so most rows a
// member's seeds reach are its own (DistDGL's range partition book).
// pull(ids) returns the rows of `ids` in their order (duplicates and an
// empty list allowed) in one round per call: every member calls pull the
// same number of times, in the same order (the runtime's micro-batches),
// and each call is two all-to-all exchanges — the ids each member wants
// from each owner (only rows it lacks: its own rows are read from its shard
// in place, never sent), then the rows back. Each id is asked for once per
// call (the ids are deduplicated first). A member that stops mid-pull makes
// the others' pull throw comm::CommError naming the lost ranks, as every
// collective of trident's does. push(ids, values) is the way back: values
// summed per id go to their owners (for sparse updates of learnable rows).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "trident/comm/group.h"

namespace trident::sync {

struct RowStats {
  std::int64_t local_rows = 0, remote_rows = 0;  // distinct rows read from the shard and pulled
  std::int64_t bytes_received = 0;               // counts, ids and rows, this member's
  RowStats& operator+=(const RowStats& o);
};

class RowStore {
 public:
  // `shard`: this member's rows [bounds[rank], bounds[rank+1]) of a [N, F]
  // table (bounds: size + 1 ascending values from 0 to N). Throws
  // comm::CommError when the shard's rows differ from the bounds'.
  RowStore(comm::Group group, std::vector<std::int64_t> bounds, torch::Tensor shard);

  // Rows of `ids` (int64 [n], each in [0, N)): [n, F], the shard's dtype.
  // A collective: see Note [Row store]. Throws comm::CommError for an id
  // outside the table or when a member fails.
  torch::Tensor pull(const torch::Tensor& ids);

  std::int64_t rows() const { return bounds_.back(); }
  std::int64_t width() const { return shard_.size(1); }
  // The rows `values` [n, F'] (any width) of `ids` to their owners, summed
  // per id (a batch's embedding gradients): returns, on every member, the
  // rows of its shard any member sent (local indices, ascending) and their
  // sums over every member's, added in member order. A collective like
  // pull (it does not touch the table).
  struct Pushed {
    torch::Tensor rows;  // int64 [k]: indices into this member's shard
    torch::Tensor sums;  // [k, F']
  };
  Pushed push(const torch::Tensor& ids, const torch::Tensor& values);

  const std::vector<std::int64_t>& bounds() const { return bounds_; }
  const torch::Tensor& shard() const { return shard_; }
  // What pulls did since the last take_stats().
  RowStats take_stats();

 private:
  // `ids` sorted and distinct (with each original id's place in them), and
  // where each member's run of them begins: begin[q] .. begin[q + 1].
  struct Runs {
    torch::Tensor unique, inverse;
    std::vector<std::int64_t> begin;
    torch::Tensor of(const torch::Tensor& t, int q) const;  // member q's rows of t (aligned with unique)
  };
  Runs by_owner(const torch::Tensor& ids, const char* call) const;
  // Sends each member q how many rows this member sends it (sends[q]);
  // returns how many each sends this member.
  std::vector<std::int64_t> trade_counts(const std::vector<std::int64_t>& sends);
  std::vector<torch::Tensor> exchange(const std::vector<torch::Tensor>& out, const std::vector<std::int64_t>& in_rows,
                                      const torch::Tensor& like, const char* what);
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const;

  comm::Group group_;
  std::vector<std::int64_t> bounds_;
  torch::Tensor shard_;
  RowStats stats_;
  std::int64_t calls_ = 0;
  const char* call_ = "pull";  // the call under way, for errors
};

}  // namespace trident::sync
