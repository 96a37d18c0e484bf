#include "trident/data/dataset.h"

#include "trident/data/source.h"

namespace trident::data {

std::int64_t Dataset::size() const { return fields.empty() ? 0 : fields.begin()->second.size(0); }

Batch Dataset::batch(const torch::Tensor& indices, const std::set<std::string>& only) const {
  Batch b;
  for (const auto& [name, t] : fields) {
    if (only.empty() || only.count(name)) b[name] = t.index_select(0, indices);
  }
  return b;
}

// MemorySource::check_fits: the fields and classes, and every label's value.
void Dataset::check_fits(const graph::OpGraph& graph, const std::set<std::string>& only) const {
  MemorySource(*this).check_fits(graph, only);
}

}  // namespace trident::data
