// The zoo's graph neural networks (internal to the zoo; see zoo.h for the
// names and Note [Graph ops] in builder.h for how a graph is one sample).
#pragma once

#include <string>

#include "trident/zoo/zoo.h"

namespace trident::zoo {

// gcn2, appnp, graph_mlp, jk_gcn16, gcnii16, gcnii64, or gcniiN for any
// depth N in 1..1024.
bool is_gnn_model(const std::string& name);
graph::OpGraph gnn_model(const ModelSpec& spec);

}  // namespace trident::zoo
