// OpGraph: the operator-level DAG of a model, the one representation that the
// planner (torch-free), the executor (nn) and the tools share.
//
// Every op has exactly one output tensor; its consumers read that tensor. An
// op's `name` is the fully qualified prefix of its parameters (e.g.
// `branch2.layer3.ffn.fc1`, whose weight is `branch2.layer3.ffn.fc1.weight`),
// so parameters, checkpoints and plans all speak of the same names.
// Sizes are per sample: FLOPs, activation bytes and tensor shapes exclude the
// batch dimension; parameter bytes are per model.
//
// Ops are appended in any order that respects their inputs (an op's inputs
// must already exist), so ids are a topological order by construction; the
// graph is nevertheless validated as a DAG when read from JSON.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"
#include "trident/graph/tensor_spec.h"

namespace trident::graph {

// Every graph error: a bad op, a shape that disagrees across an edge, a
// cycle, an unreadable JSON document. The message names the op.
using GraphError = ComponentError<struct GraphErrorTag, ErrorKind::kBadInput>;

using OpId = std::int32_t;

struct ParamSpec {
  std::string name;  // fully qualified, e.g. "fc1.weight"
  std::vector<std::int64_t> shape;
  DType dtype = DType::kFloat32;
  std::int64_t bytes() const;
};

// One input of an op: which op produces it and the spec the consumer expects.
// Validation checks that the expectation equals the producer's output.
struct OpInput {
  OpId producer = -1;
  TensorSpec expected;
};

struct Op {
  std::string name;        // unique; parameter prefix
  std::string kind;        // "linear", "conv2d", "concat", "input", "cross_entropy", ...
  nlohmann::json attrs = nlohmann::json::object();  // kind-specific settings
  std::vector<OpInput> inputs;
  TensorSpec output;       // per sample
  std::vector<ParamSpec> params;
  double forward_flops = 0;   // per sample
  double backward_flops = 0;  // per sample (input and weight gradients)
  // Bytes kept from forward for backward, per sample.
  std::int64_t activation_bytes = 0;

  std::int64_t param_bytes() const;
  bool is_input() const { return kind == "input"; }
};

class OpGraph {
 public:
  OpGraph() = default;
  explicit OpGraph(std::string name) : name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // Graph-level data of an ATen-captured model (see Note [ATen capture] in
  // tools/export/trident_aten.py): "capture" records who captured it
  // ({"by", "format", "torch"}), "constants" the tensors its ops read that
  // are not parameters (name -> {"dtype", "shape", "base64"}). Both are
  // null for zoo models and torch.fx exports.
  const nlohmann::json& capture() const { return capture_; }
  const nlohmann::json& constants() const { return constants_; }
  void set_capture(nlohmann::json capture, nlohmann::json constants);

  // Appends an op; its inputs must name existing ops and its name must be
  // new. Returns its id. Throws GraphError otherwise.
  OpId add(Op op);

  std::int32_t size() const { return static_cast<std::int32_t>(ops_.size()); }
  const Op& op(OpId id) const;
  // Sets attribute `key` of op `id` (e.g. the training recipe's
  // label_smoothing on the loss); the op's inputs and shapes stay.
  void set_attr(OpId id, const std::string& key, nlohmann::json value);
  const std::vector<Op>& ops() const { return ops_; }
  std::optional<OpId> find(const std::string& name) const;
  OpId id_of(const std::string& name) const;  // throws GraphError if absent

  // Ops that read the output of `id`, in id order.
  const std::vector<OpId>& consumers(OpId id) const;

  // Ids in a topological order (Kahn's algorithm, smallest id first).
  std::vector<OpId> topo_order() const;

  // The single sink that computes the loss (kind in loss_kinds()).
  OpId loss() const;
  static const std::set<std::string>& loss_kinds();
  // Whether a loss of this kind reads class logits and labels, so that a run
  // reports accuracy: cross_entropy and masked_cross_entropy.
  static bool classifies(const std::string& loss_kind);
  // Note [Token losses]
  // ~~~~~~~~~~~~~~~~~~~
  // A cross_entropy whose logits have more than one axis per sample
  // ([..., T, C], labels [..., T]) scores every position: a language model's
  // next token, a tagger's tag. Positions whose label is the op's
  // `ignore_index` (attr; -100 by default, as PyTorch's) count for nothing.
  // Like every loss op it returns a sum (see Note [Loss scale] in
  // nn/graph_executor.h), here over the counted positions of the rows it saw, and
  // the caller divides by the positions counted in the *global* batch (not
  // its samples, and never a micro-batch's own count): so one process gives
  // PyTorch's mean over the batch's counted tokens, and every plan gives
  // one process's gradients however unevenly micro-batches and replicas
  // hold ignored positions. nn::loss_divisor computes that count.
  static bool per_token(const Op& loss);
  static constexpr std::int64_t kIgnoreIndex = -100;

  // Whole-graph checks: acyclic, unique names, each input's expected spec
  // equals its producer's output, exactly one loss op and it is the only op
  // without consumers, input ops have no inputs, every "aten" op's program
  // parses (parse_aten_program). Throws GraphError naming the first problem.
  void validate() const;

  // A subset S is convex when no path leaves S and comes back into it; such a
  // subset can run as one pipeline stage.
  bool is_convex(const std::set<OpId>& subset) const;

  // Per op: whether a training pass computes the gradient of its output,
  // that is, whether a parameter lies at or upstream of it. The first layer
  // never computes the gradient of its input (the data).
  std::vector<bool> carries_gradients() const;

  // Totals over the whole graph.
  std::int64_t param_bytes() const;
  // The parameters the ops hold, each counted once however many of them
  // read it (a head tied to an embedding: see Note [Tied parameters] in
  // executor/tied_params.h). param_bytes() is this over every op.
  std::int64_t param_bytes_of(const std::vector<OpId>& ops) const;
  std::int64_t input_bytes() const;  // one sample of every input field
  double forward_flops() const;

  nlohmann::json to_json() const;
  static OpGraph from_json(const nlohmann::json& doc);  // validates

 private:
  std::string name_;
  nlohmann::json capture_, constants_;
  std::vector<Op> ops_;
  std::vector<std::vector<OpId>> consumers_;
  std::map<std::string, OpId> by_name_;
};

}  // namespace trident::graph
