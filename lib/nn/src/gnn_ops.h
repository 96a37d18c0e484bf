// The functions of graph ops that read more than their inputs (internal to
// nn; GraphModule builds them): see Note [Graph ops] in zoo/builder.h and
// Note [Node partitions] in nn/node_parts.h.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

#include "trident/graph/op_graph.h"
#include "trident/nn/graph_module.h"

namespace trident::nn {

// graph_aggregate: A.X for each sample, A the sparse graph constant the op
// names (NAME.index, NAME.weight in `constants`); under a NodePartScope,
// this part's rows, its halo traded with the other parts. Throws
// graph::GraphError when the constants are missing or do not fit.
OpFn aggregate_of(const graph::Op& op, const std::map<std::string, torch::Tensor>& constants);

}  // namespace trident::nn
