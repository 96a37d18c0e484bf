// Note [Node partitions]
// ~~~~~~~~~~~~~~~~~~~~~~
// Graph parallelism (a plan stage with partition "nodes", plan/plan.h):
// P processes run one GNN on one graph, process p owning the nodes
// [bounds[p], bounds[p+1]) — its rows of every [N, d] tensor. Row-wise ops
// (linear, relu, mix, identity_map, concat) run on the owned rows as they
// are. Three ops need the rest of the graph and read this thread's
// NodeParts:
//   graph_aggregate  a row reads neighbours that other parts own (its
//                    halo): forward, each part sends the rows the others
//                    read and receives its halo; backward, it sends the
//                    halo's gradients to their owners, who add them to
//                    their rows' — 4 d bytes per halo row each way, so
//                    8 d sum_p |halo_p| per aggregation and step (4 d
//                    when its input is the data: no gradient goes back). The
//                    product runs over the whole graph's columns in their
//                    order, so a row's sum is the one process's, bit for bit;
//   dropout          draws the whole graph's mask and keeps its rows, so
//                    every plan drops the same units;
//   masked_cross_entropy (and the accuracy) divide by the whole graph's
//                    masked count, so the parts' losses sum to one
//                    process's.
// Weight gradients are sums over the owned rows, summed by the stage's
// gradient sync. The executor opens a NodePartScope around a partitioned
// stage's forwards and backwards and slices its dataset fields to the
// owned rows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "trident/nn/thread_scope.h"

namespace trident::nn {

struct NodeParts {
  int part = 0, parts = 1;
  std::vector<std::int64_t> bounds;  // parts + 1 ascending node ids: part p owns [bounds[p], bounds[p+1])
  double mask_total = 0;             // masked nodes of the whole graph (one graph per step)
  // Sends out[q] to part q (q != part; nothing when it has no rows) and
  // returns, for each q, the rows[q] x width tensor q sent (undefined for
  // this part); out[part] is an empty tensor of the received tensors'
  // dtype and device. `direction`: 0 forward, 1 backward. Every part calls it in
  // the same order.
  std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>& out, const std::vector<std::int64_t>& rows,
                                           std::int64_t width, int direction)>
      exchange;
  std::int64_t lo() const { return bounds.at(static_cast<std::size_t>(part)); }
  std::int64_t hi() const { return bounds.at(static_cast<std::size_t>(part) + 1); }
  std::int64_t nodes() const { return bounds.back(); }
};

// Sets this thread's node partition until it closes (scopes nest).
using NodePartScope = ThreadScope<NodeParts>;

// This thread's partition, or null outside every scope.
inline const std::shared_ptr<const NodeParts>& node_parts() { return NodePartScope::current(); }

}  // namespace trident::nn
