#include "trident/data/source.h"

#include "trident/tensor/spec.h"

namespace trident::data {

Batch Source::allocate(std::int64_t rows, const std::set<std::string>& only) const {
  Batch b;
  for (const auto& [field, spec] : specs()) {
    if (!only.empty() && !only.count(field)) continue;
    std::vector<std::int64_t> shape{rows};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    b[field] = torch::empty(shape, tensor::to_torch(spec.dtype));
  }
  return b;
}

Batch Source::read(const torch::Tensor& ids, const std::set<std::string>& only, std::int64_t epoch) const {
  auto b = allocate(ids.size(0), only);
  const auto* id = ids.data_ptr<std::int64_t>();
  std::map<std::string, torch::Tensor> rows;
  for (std::int64_t i = 0; i < ids.size(0); ++i) {
    for (auto& [field, t] : b) rows[field] = t[i];
    read_sample(id[i], epoch, rows);
  }
  return b;
}

void Source::check_fits(const graph::OpGraph& graph, const std::set<std::string>& only) const {
  const auto have = specs();
  for (const auto& op : graph.ops()) {
    if (!op.is_input()) continue;
    const std::string field = op.attrs.value("field", op.name);
    if (!only.empty() && !only.count(field)) continue;
    auto it = have.find(field);
    if (it == have.end()) {
      std::string names;
      for (const auto& f : have) names += (names.empty() ? "" : ", ") + f.first;
      throw DataError("data.name = " + name() + ": model '" + graph.name() + "' reads field '" + field +
                      "', which this dataset lacks (it has " + names + ")");
    }
    if (it->second != op.output)
      throw DataError("data.name = " + name() + ": field '" + field + "' holds " + graph::to_string(it->second) +
                      " per sample but model '" + graph.name() + "' expects " + graph::to_string(op.output));
  }
  const auto& loss = graph.op(graph.loss());
  if (!graph::OpGraph::classifies(loss.kind)) return;
  const auto classes = loss.inputs[0].expected.shape.back();
  if (num_classes() > classes)
    throw DataError("data.name = " + name() + " has " + std::to_string(num_classes()) + " classes but model '" +
                    graph.name() + "' predicts " + std::to_string(classes));
}

MemorySource::MemorySource(Dataset d) : Source(d.name), d_(std::move(d)) {}

std::map<std::string, graph::TensorSpec> MemorySource::specs() const {
  std::map<std::string, graph::TensorSpec> out;
  for (const auto& [field, t] : d_.fields) {
    graph::TensorSpec s;
    s.shape.assign(t.sizes().begin() + 1, t.sizes().end());
    s.dtype = t.scalar_type() == torch::kInt64 ? graph::DType::kInt64 : graph::DType::kFloat32;
    out[field] = s;
  }
  return out;
}

void MemorySource::read_sample(std::int64_t id, std::int64_t, std::map<std::string, torch::Tensor>& rows) const {
  for (auto& [field, row] : rows) row.copy_(d_.fields.at(field)[id]);
}

Batch MemorySource::read(const torch::Tensor& ids, const std::set<std::string>& only, std::int64_t) const {
  return d_.batch(ids, only);
}

void MemorySource::check_fits(const graph::OpGraph& graph, const std::set<std::string>& only) const {
  Source::check_fits(graph, only);
  const auto& loss = graph.op(graph.loss());
  if (!graph::OpGraph::classifies(loss.kind)) return;
  const auto classes = loss.inputs[0].expected.shape.back();
  const auto& name = d_.name;
  // A negative label is only ever the loss's ignore_index (Note [Token losses]).
  const auto label = d_.fields.find("label");
  if (label == d_.fields.end() || label->second.scalar_type() != torch::kInt64 || !label->second.numel()) return;
  const auto ignore = loss.attrs.value("ignore_index", graph::OpGraph::kIgnoreIndex);
  const auto bad = label->second.lt(0).logical_and(label->second.ne(ignore));
  if (bad.any().item<bool>())
    throw DataError("data.name = " + name + ": field 'label' holds class id " +
                    std::to_string(label->second.masked_select(bad)[0].item<std::int64_t>()) + "; model '" +
                    graph.name() + "' takes ids from 0 to " + std::to_string(classes - 1) + ", or " +
                    std::to_string(ignore) + " (its loss's ignore_index) for a position that counts for nothing");
}



Sources in_memory(Splits s) {
  return {std::make_shared<MemorySource>(std::move(s.train)), std::make_shared<MemorySource>(std::move(s.test))};
}

}  // namespace trident::data
