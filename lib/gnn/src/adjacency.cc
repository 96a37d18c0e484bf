// GCN's normalised adjacency and GraphSAGE's mean (see gcn_adjacency and
// mean_adjacency in gnn/graph_data.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "trident/gnn/graph_data.h"
#include "trident/graph/constants.h"

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

Adjacency mean_adjacency(const GraphData& g) {
  std::vector<std::int64_t> degree(static_cast<std::size_t>(g.nodes), 0);
  for (std::int64_t k = 0; k < g.edges(); ++k)
    if (g.src[static_cast<std::size_t>(k)] != g.dst[static_cast<std::size_t>(k)]) ++degree[static_cast<std::size_t>(g.dst[static_cast<std::size_t>(k)])];
  Adjacency a;
  a.nodes = g.nodes;
  for (std::int64_t k = 0; k < g.edges(); ++k) {  // sorted by (target, source): rows, then columns
    const auto r = g.dst[static_cast<std::size_t>(k)], c = g.src[static_cast<std::size_t>(k)];
    if (r == c) continue;
    a.rows.push_back(r), a.cols.push_back(c);
    a.weights.push_back(static_cast<float>(1.0 / static_cast<double>(degree[static_cast<std::size_t>(r)])));
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

std::vector<std::int64_t> even_bounds(std::int64_t nodes, int parts) {
  std::vector<std::int64_t> b{0};
  for (int p = 0; p < parts; ++p) b.push_back(b.back() + nodes / parts + (p < nodes % parts ? 1 : 0));
  return b;
}

Adjacency constant_adjacency(const graph::OpGraph& g, std::string name) {
  for (const auto& op : g.ops())
    if (name.empty() && op.kind == "graph_aggregate") name = op.attrs.value("adjacency", std::string());
  if (name.empty()) name = "adjacency";
  const auto& c = g.constants();
  if (!c.is_object() || !c.contains(name + ".index") || !c.contains(name + ".weight"))
    throw GraphDataError("model '" + g.name() + "' holds no graph constant '" + name + "'");
  auto bytes = [&](const std::string& key) { return graph::decode_constant(key, c.at(key)).bytes; };
  const auto index = bytes(name + ".index"), weight = bytes(name + ".weight");
  Adjacency a;
  const std::size_t nnz = weight.size() / sizeof(float);
  if (index.size() != 2 * nnz * sizeof(std::int64_t))
    throw GraphDataError("model '" + g.name() + "': graph constants '" + name + "' disagree in size");
  a.rows.resize(nnz), a.cols.resize(nnz), a.weights.resize(nnz);
  std::memcpy(a.rows.data(), index.data(), nnz * 8);
  std::memcpy(a.cols.data(), index.data() + nnz * 8, nnz * 8);
  std::memcpy(a.weights.data(), weight.data(), nnz * 4);
  for (auto r : a.rows) a.nodes = std::max(a.nodes, r + 1);
  return a;
}

ChunkReadCounts chunk_read_counts(const Adjacency& a, const std::vector<std::int64_t>& bounds, int per) {
  auto group = [&](std::int64_t node) {
    const auto chunk = std::upper_bound(bounds.begin(), bounds.end(), node) - bounds.begin() - 1;
    return chunk / std::max(1, per);
  };
  ChunkReadCounts n;
  for (std::int64_t e = 0; e < a.nnz(); ++e) {
    const auto row = group(a.rows[static_cast<std::size_t>(e)]), col = group(a.cols[static_cast<std::size_t>(e)]);
    (col == row ? n.own : col < row ? n.fresh : n.stale) += 1;
  }
  return n;
}

double partition_bytes(const graph::OpGraph& g, int parts) {
  const auto carries = g.carries_gradients();
  double widths = 0;  // 4 bytes a halo row forward, and 4 backward where the input carries a gradient
  std::int64_t nodes = 0;
  for (const auto& op : g.ops())
    if (op.kind == "graph_aggregate") {
      const bool backward = carries[static_cast<std::size_t>(op.inputs.at(0).producer)];
      widths += static_cast<double>(op.output.shape.at(1)) * (backward ? 2 : 1);
      nodes = op.attrs.value("nodes", op.output.shape.at(0));
    }
  if (widths == 0 || parts < 2) return 0;
  std::int64_t halo = 0;
  for (auto h : halo_sizes(constant_adjacency(g), even_bounds(nodes, parts))) halo += h;
  return 4 * widths * static_cast<double>(halo);
}

}  // namespace trident::gnn
