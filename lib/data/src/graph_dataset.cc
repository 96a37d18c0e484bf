// A graph as a dataset of one sample (see load_graph_dataset in dataset.h).
#include "trident/data/dataset.h"
#include "trident/gnn/graph_data.h"

namespace trident::data {
namespace {

torch::Tensor mask_of(const std::vector<std::uint8_t>& m) {
  return torch::from_blob(const_cast<std::uint8_t*>(m.data()), {1, static_cast<std::int64_t>(m.size())}, torch::kUInt8)
      .to(torch::kFloat32);
}

// [1, N, ...] -> [K, C, ...]: chunk k holds nodes [b[k], b[k+1]) and zeros after them.
torch::Tensor chunked(const torch::Tensor& whole, const std::vector<std::int64_t>& b) {
  const auto k = static_cast<std::int64_t>(b.size()) - 1;
  auto shape = whole.sizes().vec();
  shape[0] = k, shape[1] = b[1] - b[0];
  auto out = torch::zeros(shape, whole.options());
  for (std::int64_t c = 0; c < k; ++c) out[c].narrow(0, 0, b[c + 1] - b[c]).copy_(whole[0].narrow(0, b[c], b[c + 1] - b[c]));
  return out;
}

}  // namespace

Splits load_graph_dataset(const std::string& source, const std::string& eval, const std::set<std::string>& fields,
                          int chunks) {
  if (eval != "val" && eval != "test")
    throw DataError("data.eval = '" + eval + "': allowed val, test (the mask evaluation reads)");
  const bool features = fields.empty() || fields.count("features");
  const auto g = gnn::load_graph(source, features);
  Splits s;
  auto shared = [&](Dataset& d) {
    d.name = "graph " + g.name;
    d.num_classes = g.classes;
    auto want = [&](const char* f) { return fields.empty() || fields.count(f); };
    if (features)
      d.fields["features"] =
          torch::from_blob(const_cast<float*>(g.x.data()), {1, g.nodes, g.features}, torch::kFloat32).clone();
    if (want("label"))
      d.fields["label"] = torch::from_blob(const_cast<std::int64_t*>(g.labels.data()), {1, g.nodes}, torch::kInt64).clone();
  };
  shared(s.train);
  shared(s.test);
  if (fields.empty() || fields.count("mask")) {
    s.train.fields["mask"] = mask_of(g.train);
    s.test.fields["mask"] = mask_of(eval == "val" ? g.val : g.test);
  }
  if (chunks > g.nodes)
    throw DataError("model.graph_chunks = " + std::to_string(chunks) + ": more chunks than the graph's " +
                    std::to_string(g.nodes) + " nodes");
  if (chunks > 1) {
    const auto b = gnn::even_bounds(g.nodes, chunks);
    for (auto* d : {&s.train, &s.test}) {
      for (auto& [name, t] : d->fields) t = chunked(t, b);
      d->in_order = true;
    }
  }
  return s;
}

}  // namespace trident::data
