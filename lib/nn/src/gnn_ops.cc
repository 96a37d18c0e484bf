// Ops over a graph's adjacency: graph_aggregate on one process (Note [Graph
// ops] in zoo/builder.h), on a node partition (Note [Node partitions] in
// nn/node_parts.h) and on a chunk of the nodes (Note [Node chunks] in
// nn/node_chunks.h).
#include "gnn_ops.h"

#include <ATen/record_function.h>

#include "trident/gnn/graph_data.h"
#include "trident/nn/node_chunks.h"
#include "trident/nn/node_parts.h"

namespace trident::nn {

using graph::GraphError;
using graph::Op;

namespace {

// See Note [Node partitions] in node_parts.h: the halo a part reads arrives
// from its owners forward, and its gradient goes back to them backward.
struct HaloExchange : torch::autograd::Function<HaloExchange> {
  // `send[q]`: the owned rows (0-based) part q reads; `receive[q]`: how many rows this part reads from q.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const std::vector<torch::Tensor>& send, const std::vector<std::int64_t>& receive) {
    const auto& parts = node_parts();
    std::vector<torch::Tensor> out(send.size());
    for (std::size_t q = 0; q < send.size(); ++q)
      out[q] = static_cast<int>(q) == parts->part ? x.new_empty({0}) : x.index_select(0, send[q]).contiguous();
    auto got = parts->exchange(out, receive, x.size(1), 0);
    std::vector<torch::Tensor> halo;
    for (std::size_t q = 0; q < got.size(); ++q)
      if (static_cast<int>(q) != parts->part) halo.push_back(got[q]);
    ctx->saved_data["send"] = send;
    ctx->saved_data["receive"] = receive;
    ctx->saved_data["rows"] = x.size(0);
    return torch::cat(halo);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto& parts = node_parts();
    if (!parts) throw std::logic_error("graph_aggregate's halo backward runs outside its node partition");
    const auto send = ctx->saved_data["send"].toTensorVector();
    const auto receive = ctx->saved_data["receive"].toIntVector();
    const auto g = grads[0].contiguous();
    std::vector<torch::Tensor> out(send.size());
    std::vector<std::int64_t> rows(send.size(), 0);
    std::int64_t at = 0;
    for (std::size_t q = 0; q < send.size(); ++q) {
      if (static_cast<int>(q) == parts->part) {
        out[q] = g.new_empty({0});  // the options of what arrives
        continue;
      }
      out[q] = g.narrow(0, at, receive[q]).contiguous(), at += receive[q];
      rows[q] = send[q].numel();
    }
    auto got = parts->exchange(out, rows, g.size(1), 1);
    auto dx = torch::zeros({ctx->saved_data["rows"].toInt(), g.size(1)}, g.options());
    for (std::size_t q = 0; q < send.size(); ++q)
      if (static_cast<int>(q) != parts->part && rows[q]) dx.index_add_(0, send[q], got[q]);
    return {dx, torch::Tensor(), torch::Tensor()};
  }
};

// One part's rows of the adjacency, with global columns in their order, and
// who reads what from whom.
struct PartAdjacency {
  torch::Tensor rows;                // sparse [owned, N]: this part's rows
  torch::Tensor owned, halo;         // global ids of the owned rows and of the halo (by owner, then id)
  std::vector<torch::Tensor> send;   // per part: owned rows (0-based) it reads
  std::vector<std::int64_t> receive; // per part: rows of its this part reads
  std::int64_t nodes;

  PartAdjacency(const torch::Tensor& index, const torch::Tensor& weight, const NodeParts& parts, c10::Device device)
      : nodes(parts.nodes()) {
    const auto& b = parts.bounds;
    auto halo_of = [&](int q) {  // the sorted ids outside q's range that q's rows read
      const auto in_q = index[0].ge(b[q]).logical_and(index[0].lt(b[q + 1]));
      const auto cols = std::get<0>(torch::_unique(index[1].masked_select(in_q), /*sorted=*/true));
      return cols.masked_select(cols.lt(b[q]).logical_or(cols.ge(b[q + 1])));
    };
    const int p = parts.part;
    const auto mine = halo_of(p);
    std::vector<torch::Tensor> from;
    for (int q = 0; q < parts.parts; ++q) {
      const auto lo = b[q], hi = b[q + 1];
      const auto r = mine.masked_select(mine.ge(lo).logical_and(mine.lt(hi)));
      receive.push_back(q == p ? 0 : r.numel());
      if (q != p) from.push_back(r);
      const auto theirs = q == p ? torch::empty({0}, torch::kInt64) : halo_of(q);
      send.push_back((theirs.masked_select(theirs.ge(b[p]).logical_and(theirs.lt(b[p + 1]))) - b[p]).to(device));
    }
    halo = torch::cat(from).to(device);
    owned = torch::arange(b[p], b[p + 1], torch::kInt64).to(device);
    const auto in_p = index[0].ge(b[p]).logical_and(index[0].lt(b[p + 1]));
    auto sub = index.index({torch::indexing::Slice(), in_p}).clone();
    sub[0] -= b[p];
    rows = torch::sparse_coo_tensor(sub, weight.masked_select(in_p), {b[p + 1] - b[p], nodes}).coalesce().to(device);
  }

  torch::Tensor aggregate(const torch::Tensor& x) const {
    std::vector<torch::Tensor> out;
    for (std::int64_t s = 0; s < x.size(0); ++s) {
      const auto h = HaloExchange::apply(x[s], send, receive);
      auto whole = torch::zeros({nodes, x.size(2)}, x.options()).index_copy(0, owned, x[s]).index_copy(0, halo, h);
      out.push_back(torch::mm(rows, whole));
    }
    return torch::stack(out);
  }
};

// See Note [Node chunks] in node_chunks.h: one aggregation's cache of its
// input rows, and the adjacency rows of each micro-batch's chunks.
class ChunkedAggregate {
 public:
  ChunkedAggregate(std::string name, torch::Tensor index, torch::Tensor weight, std::int64_t nodes)
      : name_(std::move(name)), index_(std::move(index)), weight_(std::move(weight)), nodes_(nodes) {}

  // x: [count, C, d], the rows of chunks [first, first + count), each padded to C.
  torch::Tensor operator()(const torch::Tensor& x, const NodeChunks& c) {
    if (x.size(0) != c.count)
      throw Failure("op '" + name_ + "' (graph_aggregate) got " + std::to_string(x.size(0)) + " chunks, its scope " +
                    std::to_string(c.count));
    const auto& b = c.bounds;
    const auto lo = b.at(c.first), hi = b.at(c.first + c.count);
    std::vector<torch::Tensor> own;
    for (std::int64_t j = 0; j < c.count; ++j) own.push_back(x[j].narrow(0, 0, b[c.first + j + 1] - b[c.first + j]));
    const auto mine = torch::cat(own);
    const auto& r = rows_of(c, x.device());
    // The rows the product reads, in node order: the halo below the chunks, theirs, the halo above.
    auto read = mine;
    if (r.halo.numel()) {
      const auto halo = halo_rows(r, c, x);
      read = torch::cat({halo.narrow(0, 0, r.below), mine, halo.narrow(0, r.below, halo.size(0) - r.below)});
    }
    const auto out = torch::mm(r.a, read);
    if (c.training) {
      if (!cache_.defined()) cache_ = torch::zeros({nodes_, x.size(2)}, x.options()), written_.assign(c.chunks, -1);
      cache_.narrow(0, lo, hi - lo).copy_(mine.detach());
      for (auto k = c.first; k < c.first + c.count; ++k) written_[static_cast<std::size_t>(k)] = c.step;
    }
    std::vector<torch::Tensor> padded;
    for (std::int64_t j = 0; j < c.count; ++j) {
      const auto n = b[c.first + j + 1] - b[c.first + j];
      padded.push_back(torch::cat({out.narrow(0, b[c.first + j] - lo, n), out.new_zeros({x.size(1) - n, x.size(2)})}));
    }
    return torch::stack(padded);
  }

 private:
  // A's rows for chunks [first, first + count) over the columns they read
  // (halo below, own, halo above: node order kept, so each row sums its
  // entries in the order the whole graph's product does).
  struct Rows {
    torch::Tensor a;                  // sparse [hi - lo, below + (hi - lo) + above]
    torch::Tensor halo;               // global ids outside [lo, hi) they read, ascending
    std::int64_t below = 0;           // of them, how many lie below lo
    std::vector<std::int64_t> reads;  // per chunk: entries of `a` in its columns
  };

  const Rows& rows_of(const NodeChunks& c, c10::Device device) {
    auto& r = rows_[{c.first, c.count}];
    if (r.a.defined()) return r;
    const auto lo = c.bounds.at(c.first), hi = c.bounds.at(c.first + c.count);
    const auto in = index_[0].ge(lo).logical_and(index_[0].lt(hi));
    auto sub = index_.index({torch::indexing::Slice(), in}).clone();
    const auto cols = sub[1].clone();
    const auto read = std::get<0>(torch::_unique(cols, /*sorted=*/true));
    const auto halo = read.masked_select(read.lt(lo).logical_or(read.ge(hi)));
    r.below = read.lt(lo).sum().item<std::int64_t>();
    // A column's place among those read: its rank among the halo ids below it, plus the own rows before it.
    const auto before_halo = torch::searchsorted(halo, cols);
    sub[1] = before_halo + cols.ge(lo).to(torch::kInt64) * (cols.clamp(lo, hi) - lo);
    sub[0] -= lo;
    r.a = torch::sparse_coo_tensor(sub, weight_.masked_select(in), {hi - lo, halo.numel() + hi - lo}).coalesce().to(device);
    r.halo = halo.to(device);
    const auto inner = torch::tensor(std::vector<std::int64_t>(c.bounds.begin() + 1, c.bounds.end() - 1), torch::kInt64);
    const auto chunk = torch::bucketize(cols, inner, /*out_int32=*/false, /*right=*/true);
    const auto counts = torch::bincount(chunk, {}, c.chunks);
    r.reads.assign(counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + c.chunks);
    return r;
  }

  // The halo's rows from the cache, each read checked and counted; a
  // no-grad forward's (a recomputing stage's first) kept for its replay.
  torch::Tensor halo_rows(const Rows& r, const NodeChunks& c, const torch::Tensor& x) {
    if (!c.training) return cache_.defined() ? cache_.index_select(0, r.halo).to(x.options())
                                             : x.new_zeros({r.halo.numel(), x.size(2)});
    const std::pair<std::int64_t, std::int64_t> key{c.step, c.first};
    if (auto it = replay_.find(key); it != replay_.end() && torch::GradMode::is_enabled()) {
      auto rows = it->second;
      replay_.erase(it);
      return rows;
    }
    for (auto it = replay_.begin(); it != replay_.end();) it = it->first.first < c.step ? replay_.erase(it) : std::next(it);
    if (first_step_ < 0) first_step_ = c.step;
    ChunkReads n;
    for (int k = 0; k < c.chunks; ++k) {
      const auto e = r.reads[static_cast<std::size_t>(k)];
      if (!e) continue;
      const auto w = written_.empty() ? -1 : written_[static_cast<std::size_t>(k)];
      if (k >= c.first && k < c.first + c.count) n.own += e;
      else if (w < 0 && c.step == first_step_) n.cold += e;
      else if (w >= 0 && w == c.step) n.fresh += e;
      else if (w >= 0 && w == c.step - 1) n.stale += e;
      else
        throw Failure("op '" + name_ + "' (graph_aggregate, GNNPipe mode) at step " + std::to_string(c.step) +
                      " would read chunk " + std::to_string(k) + "'s rows " +
                      (w < 0 ? std::string("never written") : "from step " + std::to_string(w)) +
                      ", more than one epoch old: every chunk must pass every aggregation once a step "
                      "(train.mini_batch = model.graph_chunks, in node order)");
    }
    add_chunk_reads(name_, n);
    auto rows = cache_.defined() ? cache_.index_select(0, r.halo).to(x.options())
                                 : x.new_zeros({r.halo.numel(), x.size(2)});
    if (!torch::GradMode::is_enabled()) replay_[key] = rows;
    return rows;
  }

  std::string name_;
  torch::Tensor index_, weight_;
  std::int64_t nodes_;
  std::map<std::pair<std::int64_t, std::int64_t>, Rows> rows_;  // by (first, count)
  torch::Tensor cache_;                                          // [N, d]: every node's latest input row
  std::vector<std::int64_t> written_;                            // per chunk: the step it was written, -1 never
  std::int64_t first_step_ = -1;                                 // the first step this op trained
  std::map<std::pair<std::int64_t, std::int64_t>, torch::Tensor> replay_;  // (step, first) -> halo rows
};

}  // namespace

// See Note [Graph ops] in zoo/builder.h: A.X for each sample, A the sparse
// graph constant the op names, coalesced (entries by row, then column), so
// every plan sums each row in one order. The copy on another device is made
// once.
OpFn aggregate_of(const Op& op, const std::map<std::string, torch::Tensor>& constants) {
  const auto name = op.attrs.value("adjacency", std::string());
  const auto n = op.attrs.value("nodes", std::int64_t{0});
  const auto index = constants.find(name + ".index"), weight = constants.find(name + ".weight");
  if (index == constants.end() || weight == constants.end())
    throw GraphError("op '" + op.name + "' (graph_aggregate) reads graph constants '" + name + ".index' and '" + name +
                     ".weight', which the graph lacks");
  const auto& i = index->second;
  const auto& w = weight->second;
  if (i.dim() != 2 || i.size(0) != 2 || i.scalar_type() != torch::kInt64 || w.dim() != 1 ||
      w.size(0) != i.size(1) || w.scalar_type() != torch::kFloat32 ||
      (i.numel() && (i.min().item<std::int64_t>() < 0 || i.max().item<std::int64_t>() >= n)))
    throw GraphError("op '" + op.name + "' (graph_aggregate): constants '" + name + ".index' (int64 [2, nnz], ids below " +
                     std::to_string(n) + ") and '" + name + ".weight' (float32 [nnz]) do not fit");
  auto cache = std::make_shared<std::map<std::string, torch::Tensor>>();
  (*cache)["cpu"] = torch::sparse_coo_tensor(i, w, {n, n}).coalesce();
  auto partitioned = std::make_shared<std::map<std::string, std::shared_ptr<PartAdjacency>>>();
  if (const int chunks = op.attrs.value("chunks", 0); chunks > 1) {
    auto chunked = std::make_shared<ChunkedAggregate>(op.name, i, w, n);
    const auto bounds = std::make_shared<NodeChunks>();
    bounds->chunks = chunks, bounds->bounds = gnn::even_bounds(n, chunks);
    return [chunked, bounds](const std::vector<torch::Tensor>& in) {
      RECORD_USER_SCOPE("trident::graph_aggregate");
      if (const auto& c = node_chunks()) return (*chunked)(in[0], *c);
      auto alone = *bounds;  // outside the runtime (a profiler, a test): chunks from 0, not training
      alone.count = in[0].size(0);
      if (alone.count > alone.chunks)
        throw Failure("graph_aggregate on a graph of " + std::to_string(alone.chunks) + " chunks got " +
                      std::to_string(alone.count) + " samples: at most one of each chunk");
      return (*chunked)(in[0], alone);
    };
  }
  return [cache, partitioned, i, w](const std::vector<torch::Tensor>& in) {
    if (const auto& parts = node_parts(); parts && parts->parts > 1) {
      RECORD_USER_SCOPE("trident::graph_aggregate");
      auto& part = (*partitioned)[in[0].device().str() + "/" + std::to_string(parts->part) + "/" + std::to_string(parts->parts)];
      if (!part) part = std::make_shared<PartAdjacency>(i, w, *parts, in[0].device());
      return part->aggregate(in[0]);
    }
    const auto where = in[0].device().str();
    auto it = cache->find(where);
    if (it == cache->end()) it = cache->emplace(where, cache->at("cpu").to(in[0].device())).first;
    const auto& a = it->second;
    // Named for profilers and the precision test: the sparse product has no
    // bf16 kernel in LibTorch 1.13, so the policy keeps the op in fp32 and its
    // inner aten::mm calls with it (Note [Precision policy]).
    RECORD_USER_SCOPE("trident::graph_aggregate");
    std::vector<torch::Tensor> out;
    for (std::int64_t b = 0; b < in[0].size(0); ++b) out.push_back(torch::mm(a, in[0][b]));
    return torch::stack(out);
  };
}

}  // namespace trident::nn
