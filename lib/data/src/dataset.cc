#include "trident/data/dataset.h"

#include "trident/tensor/spec.h"

namespace trident::data {

std::int64_t Dataset::size() const { return fields.empty() ? 0 : fields.begin()->second.size(0); }

Batch Dataset::batch(const torch::Tensor& indices, const std::set<std::string>& only) const {
  Batch b;
  for (const auto& [name, t] : fields) {
    if (only.empty() || only.count(name)) b[name] = t.index_select(0, indices);
  }
  return b;
}

void Dataset::check_fits(const graph::OpGraph& graph, const std::set<std::string>& only) const {
  for (const auto& op : graph.ops()) {
    if (!op.is_input()) continue;
    const std::string field = op.attrs.value("field", op.name);
    if (!only.empty() && !only.count(field)) continue;
    auto it = fields.find(field);
    if (it == fields.end()) {
      std::string have;
      for (const auto& f : fields) have += (have.empty() ? "" : ", ") + f.first;
      throw DataError("data.name = " + name + ": model '" + graph.name() + "' reads field '" + field +
                      "', which this dataset lacks (it has " + have + ")");
    }
    if (!tensor::matches(it->second, op.output)) {
      throw DataError("data.name = " + name + ": field '" + field + "' holds " + tensor::describe(it->second) +
                      " but model '" + graph.name() + "' expects per sample " + graph::to_string(op.output));
    }
  }
  const auto& loss = graph.op(graph.loss());
  if (!graph::OpGraph::classifies(loss.kind)) return;
  const auto classes = loss.inputs[0].expected.shape.back();
  if (num_classes > classes) {
    throw DataError("data.name = " + name + " has " + std::to_string(num_classes) + " classes but model '" +
                    graph.name() + "' predicts " + std::to_string(classes));
  }
  // A negative label is only ever the loss's ignore_index (Note [Token losses]).
  const auto label = fields.find("label");
  if (label == fields.end() || label->second.scalar_type() != torch::kInt64 || !label->second.numel()) return;
  const auto ignore = loss.attrs.value("ignore_index", graph::OpGraph::kIgnoreIndex);
  const auto bad = label->second.lt(0).logical_and(label->second.ne(ignore));
  if (bad.any().item<bool>())
    throw DataError("data.name = " + name + ": field 'label' holds class id " +
                    std::to_string(label->second.masked_select(bad)[0].item<std::int64_t>()) + "; model '" +
                    graph.name() + "' takes ids from 0 to " + std::to_string(classes - 1) + ", or " +
                    std::to_string(ignore) + " (its loss's ignore_index) for a position that counts for nothing");
}

}  // namespace trident::data
