#include "trident/nn/executor.h"

#include <stdexcept>

namespace trident::nn {

torch::ScalarType to_torch(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::kFloat32: return torch::kFloat32;
    case graph::DType::kFloat16: return torch::kFloat16;
    case graph::DType::kBFloat16: return torch::kBFloat16;
    case graph::DType::kInt64: return torch::kInt64;
  }
  return torch::kFloat32;
}

namespace {
std::string shape_text(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? "," : "") + std::to_string(t.size(d));
  return s + "] " + std::string(c10::toString(t.scalar_type()));
}
}  // namespace

GraphExecutor::GraphExecutor(const GraphModule& module, graph::Subgraph subgraph)
    : module_(module), subgraph_(std::move(subgraph)) {}

void GraphExecutor::check(graph::OpId producer, const torch::Tensor& t, const std::string& what,
                          int64_t rows) const {
  const auto& spec = module_.graph().op(producer).output;
  bool ok = t.defined() && t.dim() == static_cast<int64_t>(spec.shape.size()) + 1 &&
            t.scalar_type() == to_torch(spec.dtype) && (rows < 0 || t.size(0) == rows);
  for (size_t a = 0; ok && a < spec.shape.size(); ++a) ok = t.size(a + 1) == spec.shape[a];
  if (!ok) {
    throw std::invalid_argument(what + " expects [batch" + (spec.shape.empty() ? "" : ",") +
                                graph::to_string(spec).substr(1) +
                                (rows >= 0 ? " with batch " + std::to_string(rows) : "") + ", got " +
                                (t.defined() ? shape_text(t) : std::string("no tensor")));
  }
}

TensorMap GraphExecutor::forward(const TensorMap& inputs, const Batch& fields) const {
  const auto& g = module_.graph();
  std::vector<torch::Tensor> values(g.size());
  int64_t rows = -1;
  for (graph::OpId p : subgraph_.inputs) {
    auto it = inputs.find(p);
    if (it == inputs.end()) {
      throw std::invalid_argument("stage input from op '" + g.op(p).name + "' was not given");
    }
    check(p, it->second, "edge from '" + g.op(p).name + "'", rows);
    rows = it->second.size(0);
    values[p] = it->second;
  }
  for (graph::OpId s : subgraph_.sources) {
    const auto field = g.op(s).attrs.value("field", g.op(s).name);
    auto it = fields.find(field);
    if (it == fields.end()) throw std::invalid_argument("dataset field '" + field + "' is missing from the batch");
    check(s, it->second, "dataset field '" + field + "'", rows);
    rows = it->second.size(0);
    values[s] = it->second;
  }
  std::vector<torch::Tensor> args;
  for (graph::OpId id : subgraph_.ops) {
    const auto& op = g.op(id);
    if (op.is_input()) continue;
    args.clear();
    for (const auto& in : op.inputs) args.push_back(values[in.producer]);
    values[id] = module_.op_fn(id)(args);
  }
  TensorMap out;
  for (graph::OpId id : subgraph_.outputs) out.emplace(id, values[id]);
  return out;
}

}  // namespace trident::nn
