// Subgraph: the boundary of a convex op subset, i.e. what a pipeline stage
// that runs those ops receives, computes and hands on. The executor (nn) and
// the planner use the same description, so a stage's edges are the same in
// the plan and at run time.
#pragma once

#include <set>
#include <vector>

#include "trident/graph/op_graph.h"

namespace trident::graph {

struct Subgraph {
  std::vector<OpId> ops;         // the subset, in topological order
  std::vector<OpId> inputs;      // producers outside the subset read by it, ascending
  std::vector<OpId> outputs;     // ops inside read outside it, or the loss, ascending
  std::vector<OpId> sources;     // input ops (dataset fields) inside the subset
  bool has_loss = false;
};

// Throws GraphError when the subset is empty, names an unknown op, or is not
// convex (the message names an op on a path that leaves and re-enters).
Subgraph make_subgraph(const OpGraph& graph, const std::set<OpId>& subset);

// The whole graph as one subgraph.
Subgraph whole_graph(const OpGraph& graph);

}  // namespace trident::graph
