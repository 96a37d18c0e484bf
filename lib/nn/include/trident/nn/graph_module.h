// GraphModule: the torch modules of every op of an OpGraph, built from the
// graph alone (so a zoo model and a user's graph are handled alike).
// Modules sit in a tree that follows the dotted op names, so the parameters
// of op `branch0.layer1.fc1` are `branch0.layer1.fc1.weight` and `.bias` —
// the names used by checkpoints, plans and gradient sync.
//
// A module may hold only some ops (a pipeline stage): the others get no
// module and no parameters, so a rank allocates only its own stage.
//
// Note [Initial weights]
// ~~~~~~~~~~~~~~~~~~~~~~
// Every parameter's initial values follow from
// (seed, parameter name) alone — a generator seeded by both draws it, with
// the distribution torch gives that layer by default (Linear and Conv2d:
// uniform ±1/sqrt(fan_in) for weight and bias; EmbeddingBag: N(0, 1);
// LayerNorm: ones and zeros). So one process, any pipeline and any data-
// parallel width start from identical weights without sending any, whoever
// builds which op.
// An op of kind "aten" (an ATen-captured model, see Note [ATen programs] in
// graph/aten_program.h) registers each parameter once under its state_dict name,
// even when several ops read it (tied weights).
// Each op's function maps its inputs (batch dimension first) to its output;
// the loss op returns the *sum* of per-sample losses (see Note [Loss scale]
// in nn/graph_executor.h).
//
// Note [Batch norm]
// ~~~~~~~~~~~~~~~~~
// Normalises each micro-batch by its own statistics, as
// PyTorch's BatchNorm does on every forward call in training mode; running
// statistics are not kept, so evaluation normalises by the evaluated batch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trident/graph/op_graph.h"
#include "trident/graph/precision.h"

namespace trident::nn {

using OpFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

class GraphModule : public torch::nn::Module {
 public:
  // Builds modules for the ops in `ops` (every op when nullopt), with
  // weights from `seed` (see Note [Initial weights]); throws graph::GraphError
  // for an unknown kind.
  explicit GraphModule(const graph::OpGraph& graph, std::uint64_t seed = 0,
                       const std::optional<std::set<graph::OpId>>& ops = std::nullopt);

  const graph::OpGraph& graph() const { return graph_; }

  // From now on every op computes under `precision` (see Note [Precision
  // policy] in graph/precision.h); fp32 until set. Parameters stay fp32.
  void set_precision(graph::Precision precision);
  graph::Precision precision() const { return precision_; }
  // Throws graph::GraphError when the op was not built here.
  const OpFn& op_fn(graph::OpId id) const;
  bool holds(graph::OpId id) const { return static_cast<bool>(fns_.at(id)); }

  // The parameters owned by the given ops, by name, in op order; throws
  // graph::GraphError naming an op this module does not hold.
  std::vector<std::pair<std::string, torch::Tensor>> parameters_of(const std::vector<graph::OpId>& ops) const;

 private:
  void place(const std::string& dotted_name, std::shared_ptr<torch::nn::Module> module);
  // The parameter `spec.name`, registered under its dotted path on first use
  // (ATen ops name parameters by their state_dict keys and may share them).
  torch::Tensor parameter(const graph::ParamSpec& spec);
  void initialise(std::uint64_t seed);

  graph::OpGraph graph_;
  std::vector<OpFn> raw_;  // each op's function in fp32
  std::vector<OpFn> fns_;  // under precision_
  graph::Precision precision_ = graph::Precision::kFp32;
};

// Note [User weights]
// ~~~~~~~~~~~~~~~~~~~
// A user's model starts from the weights its PyTorch
// module was built with: `tools/export` writes them with torch.save as a
// dict of parameter name to tensor (the module's state_dict keys, which are
// the graph's parameter names), plus "__format__" (LibTorch 1.13 cannot read
// a dict of a single entry, so the file never holds one). Each rank copies in the parameters its
// module holds, so every stage starts exactly where PyTorch would.
// Throws graph::GraphError naming `path` and the parameter when the file is
// unreadable or not such a dict, a held parameter is missing or differs in
// shape or dtype, or a key names no parameter of the graph.
void load_weights(GraphModule& module, const std::string& path);

// The seed of the generator that draws parameter `name`'s initial values
// (see Note [Initial weights]): a hash of the name, mixed with `seed`.
std::uint64_t parameter_seed(std::uint64_t seed, const std::string& name);

// The correct predictions a classifying loss's inputs hold: for
// cross_entropy, the rows (or, per token, the positions not labelled
// `ignore_index`) whose logits' argmax is the label; for
// masked_cross_entropy (`mask` its third input), per sample the share of the
// masked nodes predicted right, summed over the samples. Dividing by
// loss_divisor (nn/graph_executor.h) gives the accuracy in each.
double correct_predictions(const std::string& loss_kind, const torch::Tensor& logits, const torch::Tensor& labels,
                           const torch::Tensor& mask = {}, std::int64_t ignore_index = graph::OpGraph::kIgnoreIndex);

}  // namespace trident::nn
