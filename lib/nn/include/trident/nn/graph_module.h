// GraphModule: the torch modules of every op of an OpGraph, built from the
// graph alone (so a zoo model and a user's graph are handled alike).
// Modules sit in a tree that follows the dotted op names, so the parameters
// of op `branch0.layer1.fc1` are `branch0.layer1.fc1.weight` and `.bias` —
// the names used by checkpoints, plans and gradient sync.
//
// Parameters are initialised in op-id order from torch's global generator:
// seed it (torch::manual_seed) before construction for reproducible weights.
// Each op's function maps its inputs (batch dimension first) to its output;
// the loss op returns the *sum* of per-sample losses (see Note [Loss scale]
// in executor.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trident/graph/op_graph.h"

namespace trident::nn {

using OpFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

class GraphModule : public torch::nn::Module {
 public:
  // Builds modules for every op; throws graph::GraphError for an unknown kind.
  explicit GraphModule(const graph::OpGraph& graph);

  const graph::OpGraph& graph() const { return graph_; }
  const OpFn& op_fn(graph::OpId id) const { return fns_.at(id); }

  // The parameters owned by the given ops, by name, in op order.
  std::vector<std::pair<std::string, torch::Tensor>> parameters_of(const std::vector<graph::OpId>& ops) const;

 private:
  void place(const std::string& dotted_name, std::shared_ptr<torch::nn::Module> module);

  graph::OpGraph graph_;
  std::vector<OpFn> fns_;
};

}  // namespace trident::nn
