// GraphExecutor: runs one convex subgraph of an OpGraph — a pipeline stage, or
// the whole model — on given tensors. Inputs are the outputs of producer ops
// outside the subgraph (keyed by producer id) plus dataset fields for the
// input ops inside it; the result holds the subgraph's outputs (ops read
// outside it, and the loss when it holds the loss). Autograd flows through:
// calling backward on outputs reaches the inputs and the parameters.
//
// Note [Loss scale]
// ~~~~~~~~~~~~~~~~~
// The loss op returns the sum of per-sample losses of the rows it saw. The
// caller divides by the *global* batch size (loss_divisor: for a per-token
// loss the tokens the global batch counts, see Note [Token losses] in
// graph/op_graph.h), so gradients summed across micro-batches, replicas and
// stages equal those of one process computing the mean over the global batch
// (docs/design.md, contract "Synchronous semantics").
#pragma once

#include <functional>
#include <map>
#include <string>

#include <torch/torch.h>

#include "trident/graph/subgraph.h"
#include "trident/nn/graph_module.h"

namespace trident::nn {

using TensorMap = std::map<graph::OpId, torch::Tensor>;
using Batch = std::map<std::string, torch::Tensor>;  // dataset field -> [batch, ...]

class GraphExecutor {
 public:
  // `module` must outlive the executor.
  GraphExecutor(const GraphModule& module, graph::Subgraph subgraph);

  const graph::Subgraph& subgraph() const { return subgraph_; }

  // Checks every input against its edge's declared per-sample shape and dtype
  // and that all rows agree; throws Failure naming the edge.
  TensorMap forward(const TensorMap& inputs, const Batch& fields) const;

  // Note [Inputs on demand]
  // ~~~~~~~~~~~~~~~~~~~~~~~
  // As above, but each stage input is asked of
  // `input` (by its producer) only when the first op that reads it runs, and
  // the ops that read no stage input, directly or not, run first. So a stage
  // holding a branch of its own and the join with another stage's branch
  // computes its branch while the other stage's tensor is still on its way —
  // the two branches of one micro-batch run at the same time. Every input is
  // asked for exactly once by the end; values do not depend on the order.
  using InputSource = std::function<torch::Tensor(graph::OpId producer)>;
  TensorMap forward_on_demand(const InputSource& input, const Batch& fields) const;

  // Called after every op with its inputs and output (e.g. to capture the
  // sufficient factors of Linear layers for SFB gradient sync).
  using Observer = std::function<void(graph::OpId, const std::vector<torch::Tensor>&, const torch::Tensor&)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }
  // Called before every op (e.g. to wait for its parameters' parameter-server
  // pull, see Note [Sharded parameter server] in sync/grad_sync.h).
  using Gate = std::function<void(graph::OpId)>;
  void set_gate(Gate gate) { gate_ = std::move(gate); }

 private:
  void check(graph::OpId producer, const torch::Tensor& t, int64_t rows) const;

  const GraphModule& module_;
  graph::Subgraph subgraph_;
  std::vector<graph::OpId> order_;  // subgraph_.ops, those that read no stage input first
  std::vector<char> is_input_;      // by op id: a producer outside the subgraph that it reads
  Observer observer_;
  Gate gate_;
};

// What the loss sum of a whole batch is divided by (see Note [Loss scale]):
// for a per-token loss, the positions of `labels` -- the batch's labels,
// every row of it -- whose label is not the op's ignore_index (at least 1, so
// a batch of ignored tokens gives a loss of 0, not PyTorch's nan); for any
// other loss, the rows.
double loss_divisor(const graph::Op& loss, const torch::Tensor& labels);

}  // namespace trident::nn
