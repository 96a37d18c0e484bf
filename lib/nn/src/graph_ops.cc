// Ops over a graph's adjacency: graph_aggregate on one process (Note [Graph
// ops] in zoo/builder.h) and on a node partition (Note [Node partitions] in
// nn/node_parts.h).
#include "graph_ops.h"

#include <ATen/record_function.h>

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
