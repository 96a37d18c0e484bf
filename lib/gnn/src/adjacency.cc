// GCN's normalised adjacency (see gcn_adjacency in gnn/graph_data.h).
#include <cmath>
#include <set>

#include "trident/gnn/graph_data.h"

namespace trident::gnn {

Adjacency gcn_adjacency(const GraphData& g) {
  std::vector<double> degree(static_cast<std::size_t>(g.nodes), 1.0);  // the self loop
  for (auto t : g.dst) degree[static_cast<std::size_t>(t)] += 1;
  Adjacency a;
  a.nodes = g.nodes;
  const auto n = static_cast<std::size_t>(g.nodes + g.edges());
  a.rows.reserve(n), a.cols.reserve(n), a.weights.reserve(n);
  auto push = [&](std::int64_t r, std::int64_t c) {
    a.rows.push_back(r), a.cols.push_back(c);
    a.weights.push_back(static_cast<float>(1.0 / std::sqrt(degree[static_cast<std::size_t>(r)] *
                                                           degree[static_cast<std::size_t>(c)])));
  };
  // Edges are sorted by (target, source): merge each row's self loop in.
  std::int64_t k = 0;
  for (std::int64_t r = 0; r < g.nodes; ++r) {
    bool self = false;
    for (; k < g.edges() && g.dst[static_cast<std::size_t>(k)] == r; ++k) {
      const auto c = g.src[static_cast<std::size_t>(k)];
      if (!self && c > r) push(r, r), self = true;
      push(r, c);
    }
    if (!self) push(r, r);
  }
  return a;
}

std::vector<std::int64_t> halo_sizes(const Adjacency& a, const std::vector<std::int64_t>& bounds) {
  std::vector<std::int64_t> out;
  for (std::size_t p = 0; p + 1 < bounds.size(); ++p) {
    std::set<std::int64_t> halo;
    for (std::int64_t k = 0; k < a.nnz(); ++k) {
      const auto r = a.rows[static_cast<std::size_t>(k)], c = a.cols[static_cast<std::size_t>(k)];
      if (r >= bounds[p] && r < bounds[p + 1] && (c < bounds[p] || c >= bounds[p + 1])) halo.insert(c);
    }
    out.push_back(static_cast<std::int64_t>(halo.size()));
  }
  return out;
}

}  // namespace trident::gnn
