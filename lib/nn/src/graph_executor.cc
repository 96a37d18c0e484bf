#include "trident/nn/graph_executor.h"
#include "trident/nn/node_parts.h"
#include "trident/base/json.h"

#include <algorithm>
#include <stdexcept>

#include "trident/base/error.h"
#include "trident/tensor/spec.h"

namespace trident::nn {

GraphExecutor::GraphExecutor(const GraphModule& module, graph::Subgraph subgraph)
    : module_(module), subgraph_(std::move(subgraph)) {
  // See Note [Inputs on demand]: an op waits on a stage input when one of its
  // producers is a stage input or waits on one. Both groups keep their
  // topological order, and no op that does not wait reads one that does.
  const auto& g = module_.graph();
  is_input_.assign(g.size(), 0);
  for (graph::OpId p : subgraph_.inputs) is_input_[p] = 1;
  std::vector<char> waits = is_input_;
  std::vector<graph::OpId> later;
  for (graph::OpId id : subgraph_.ops) {
    bool reads = false;
    for (const auto& in : g.op(id).inputs) reads = reads || waits[in.producer];
    if (reads) waits[id] = 1, later.push_back(id);
    else order_.push_back(id);
  }
  order_.insert(order_.end(), later.begin(), later.end());
}

void GraphExecutor::check(graph::OpId producer, const torch::Tensor& t, int64_t rows) const {
  const auto& op = module_.graph().op(producer);
  // Under bf16 a stage input may arrive in bf16 (see Note [Precision policy]).
  auto expected = op.output;
  // See Note [Node partitions]: a partitioned stage's graph fields hold its nodes only.
  if (const auto& parts = node_parts(); parts && !expected.shape.empty() && expected.shape[0] == parts->nodes())
    expected.shape[0] = parts->hi() - parts->lo();
  auto low = expected;
  if (module_.precision() == graph::Precision::kBf16 && low.dtype == graph::DType::kFloat32)
    low.dtype = graph::DType::kBFloat16;
  if ((tensor::matches(t, expected) || tensor::matches(t, low)) && (rows < 0 || t.size(0) == rows)) return;
  const std::string what = op.is_input() ? "dataset field '" + op.attrs.value("field", op.name) + "'"
                                         : "edge from '" + op.name + "'";
  throw Failure(what + " expects [batch" + (op.output.shape.empty() ? "" : ",") + graph::to_string(op.output).substr(1) +
                (rows >= 0 ? " with batch " + std::to_string(rows) : "") + ", got " + tensor::describe(t));
}

TensorMap GraphExecutor::forward(const TensorMap& inputs, const Batch& fields) const {
  const auto& g = module_.graph();
  for (graph::OpId p : subgraph_.inputs)
    if (!inputs.count(p)) throw Failure("stage input from op '" + g.op(p).name + "' was not given");
  return forward_on_demand([&](graph::OpId p) { return inputs.at(p); }, fields);
}

TensorMap GraphExecutor::forward_on_demand(const InputSource& input, const Batch& fields) const {
  const auto& g = module_.graph();
  std::vector<torch::Tensor> values(g.size());
  int64_t rows = -1;
  for (graph::OpId s : subgraph_.sources) {
    const auto field = g.op(s).attrs.value("field", g.op(s).name);
    auto it = fields.find(field);
    if (it == fields.end()) throw Failure("dataset field '" + field + "' is missing from the batch");
    check(s, it->second, rows);
    rows = it->second.size(0);
    values[s] = it->second;
  }
  auto fetch = [&](graph::OpId p) {
    if (!is_input_[p] || values[p].defined()) return;
    auto t = input(p);
    check(p, t, rows);
    rows = t.size(0);
    values[p] = std::move(t);
  };
  std::vector<torch::Tensor> args;
  for (graph::OpId id : order_) {
    const auto& op = g.op(id);
    if (op.is_input()) continue;
    args.clear();
    for (const auto& in : op.inputs) {
      fetch(in.producer);
      args.push_back(values[in.producer]);
    }
    if (gate_) gate_(id);
    values[id] = module_.op_fn(id)(args);
    if (observer_) observer_(id, args, values[id]);
  }
  for (graph::OpId p : subgraph_.inputs) fetch(p);
  TensorMap out;
  for (graph::OpId id : subgraph_.outputs) out.emplace(id, values[id]);
  return out;
}

double loss_divisor(const graph::Op& loss, const torch::Tensor& labels) {
  if (!graph::OpGraph::per_token(loss)) return static_cast<double>(labels.size(0));
  const auto ignore = loss.attrs.value("ignore_index", graph::OpGraph::kIgnoreIndex);
  return std::max<double>(1, labels.ne(ignore).sum().item<double>());
}

}  // namespace trident::nn
