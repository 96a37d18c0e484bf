// Series-parallel (SP) decomposition of an OpGraph, the structure GraphPipe's
// partitioner searches over (docs/algorithms.md §2).
//
// The decomposition is over ops (nodes):
//   - Series(A1, ..., Ak): every op of Ai reaches every op of Aj for i < j,
//     so in any pipeline built from the pieces, Ai is wholly upstream of Aj.
//   - Parallel(C1, ..., Ck): the Ci are weakly connected components with no
//     edge between them; they can run as concurrent stages.
//   - Leaf(op).
// Series children are leaves or parallel nodes; parallel children are leaves
// or series nodes (nested series are flattened).
//
// A graph without such a structure (e.g. a "N": a→c, a→d, b→d) is SP-ized:
// it is cut into Series(A, B) at the downset prefix that needs the fewest
// added edges, as if every sink of A fed every source of B. The added edges
// are reported; they only narrow the plans the partitioner considers (a stage
// never straddles such a cut) and never change what the model computes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trident/graph/op_graph.h"

namespace trident::graph {

struct SpNode {
  enum class Kind { kLeaf, kSeries, kParallel };
  Kind kind = Kind::kLeaf;
  OpId op = -1;                  // kLeaf only
  std::vector<SpNode> children;  // kSeries: upstream first; kParallel: by smallest op id

  std::vector<OpId> ops() const;  // every op under this node, ascending
  bool is_chain() const;          // a leaf, or a series of leaves: no parallel node
  static SpNode leaf(OpId op);
};

struct SpDecomposition {
  SpNode root;
  // Edges (from, to) that SP-ization added; empty when the graph is SP.
  std::vector<std::pair<OpId, OpId>> added_edges;
  bool is_series_parallel() const { return added_edges.empty(); }
};

// With `skip_inputs`, input ops (dataset fields: no cost, no predecessors)
// are left out, so a label feeding the loss is not a "branch"; the planner
// attaches them to a stage of their consumers afterwards.
// Throws GraphError when no ops remain.
SpDecomposition sp_decompose(const OpGraph& graph, bool skip_inputs = false);

// The sequential view used by pipeline baselines (PipeDream): one Series of
// leaves in `graph.topo_order()`. Edges between consecutive ops that the
// graph lacks are reported as added.
SpDecomposition linearize(const OpGraph& graph, bool skip_inputs = false);

// Compact text for tests and logs: leaves are op ids, "S(...)" and "P(...)".
std::string to_string(const SpNode& node);

}  // namespace trident::graph
