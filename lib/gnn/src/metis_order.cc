// A METIS node order (see reorder_by_metis in gnn/graph_data.h).
#include <metis.h>

#include <algorithm>
#include <numeric>

#include "trident/gnn/graph_data.h"

namespace trident::gnn {

std::vector<std::int64_t> metis_parts(const GraphData& g, int parts) {
  if (parts < 2 || parts > g.nodes)
    throw GraphDataError("graph " + g.name + ": metis = " + std::to_string(parts) + ": allowed 2 to the nodes (" +
                         std::to_string(g.nodes) + ")");
  // CSR of the symmetric graph: edges are sorted by (target, source).
  std::vector<idx_t> xadj(static_cast<std::size_t>(g.nodes) + 1, 0), adjncy;
  adjncy.reserve(g.src.size());
  for (std::int64_t k = 0; k < g.edges(); ++k) {
    ++xadj[static_cast<std::size_t>(g.dst[static_cast<std::size_t>(k)]) + 1];
    adjncy.push_back(static_cast<idx_t>(g.src[static_cast<std::size_t>(k)]));
  }
  for (std::size_t i = 1; i < xadj.size(); ++i) xadj[i] += xadj[i - 1];
  idx_t n = static_cast<idx_t>(g.nodes), ncon = 1, k = parts, cut = 0;
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = 0;     // the same order on every rank and run
  options[METIS_OPTION_UFACTOR] = 1;  // parts within 0.1% of equal, so even node ranges nearly follow them
  std::vector<idx_t> part(static_cast<std::size_t>(g.nodes), 0);
  const int status = METIS_PartGraphKway(&n, &ncon, xadj.data(), adjncy.data(), nullptr, nullptr, nullptr, &k, nullptr,
                                         nullptr, options, &cut, part.data());
  if (status != METIS_OK)
    throw GraphDataError("graph " + g.name + ": METIS could not partition it into " + std::to_string(parts) +
                         " parts (status " + std::to_string(status) + ")");
  return {part.begin(), part.end()};
}

GraphData reorder_by_metis(const GraphData& g, int parts) {
  const auto part = metis_parts(g, parts);
  std::vector<std::int64_t> order(static_cast<std::size_t>(g.nodes));  // new id -> old id
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return part[static_cast<std::size_t>(a)] < part[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> id(order.size());  // old id -> new id
  for (std::size_t i = 0; i < order.size(); ++i) id[static_cast<std::size_t>(order[i])] = static_cast<std::int64_t>(i);
  GraphData r = g;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto old = static_cast<std::size_t>(order[i]);
    r.labels[i] = g.labels[old], r.train[i] = g.train[old], r.val[i] = g.val[old], r.test[i] = g.test[old];
    if (!g.x.empty())
      std::copy_n(g.x.begin() + static_cast<std::ptrdiff_t>(old) * g.features, g.features,
                  r.x.begin() + static_cast<std::ptrdiff_t>(i) * g.features);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> edges;  // (target, source), renumbered
  for (std::int64_t k = 0; k < g.edges(); ++k)
    edges.push_back({id[static_cast<std::size_t>(g.dst[static_cast<std::size_t>(k)])],
                     id[static_cast<std::size_t>(g.src[static_cast<std::size_t>(k)])]});
  std::sort(edges.begin(), edges.end());
  for (std::size_t k = 0; k < edges.size(); ++k) r.dst[k] = edges[k].first, r.src[k] = edges[k].second;
  return r;
}

}  // namespace trident::gnn
