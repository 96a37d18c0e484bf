// R-MAT graphs (Chakrabarti et al. 2004) with Graph500's parameters, for
// graphs whose degrees follow a power law, at any size, without a download
// (`model.graph: rmat[:key=value,...]`, Note [Graphs as data]).
#pragma once

#include <string>

#include "trident/gnn/graph_data.h"

namespace trident::gnn {

// csbm's labels, features and masks (classes by node id range, as
// `ordered=1`) with R-MAT's edges: each edge picks a quadrant of the
// adjacency matrix level by level with probabilities (0.57, 0.19, 0.19,
// 0.05), so nodes whose ids share their high bits — one class's range —
// link more often: with 2^k classes an edge stays in its class with
// probability about (0.57 + 0.05)^k (0.38 for 4 classes, against 0.25 by
// chance). Graph500's random relabelling of the nodes is left out,
// so the labels carry the structure. `homophily` and `ordered` are unused.
GraphData generate_rmat(const CsbmOptions& o, bool with_features = true);
// "rmat[:key=value,...]" with csbm's keys; GraphDataError naming the key.
CsbmOptions parse_rmat(const std::string& source);

}  // namespace trident::gnn
