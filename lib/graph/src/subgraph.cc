#include "trident/graph/subgraph.h"

namespace trident::graph {

Subgraph make_subgraph(const OpGraph& graph, const std::set<OpId>& subset) {
  if (subset.empty()) throw GraphError("a stage must hold at least one op");
  for (OpId id : subset) graph.op(id);  // range check
  if (!graph.is_convex(subset)) {
    throw GraphError("op set starting at '" + graph.op(*subset.begin()).name +
                     "' is not convex: a path leaves it and comes back, so it cannot run as one stage");
  }
  Subgraph sg;
  std::set<OpId> inputs, outputs;
  for (OpId id : graph.topo_order()) {
    if (!subset.count(id)) continue;
    sg.ops.push_back(id);
    const Op& o = graph.op(id);
    if (o.is_input()) sg.sources.push_back(id);
    for (const auto& in : o.inputs) {
      if (!subset.count(in.producer)) inputs.insert(in.producer);
    }
    if (OpGraph::loss_kinds().count(o.kind)) {
      sg.has_loss = true;
      outputs.insert(id);
    }
    for (OpId c : graph.consumers(id)) {
      if (!subset.count(c)) outputs.insert(id);
    }
  }
  sg.inputs.assign(inputs.begin(), inputs.end());
  sg.outputs.assign(outputs.begin(), outputs.end());
  return sg;
}

Subgraph whole_graph(const OpGraph& graph) {
  std::set<OpId> all;
  for (OpId id = 0; id < graph.size(); ++id) all.insert(id);
  return make_subgraph(graph, all);
}

}  // namespace trident::graph
