// A graph as a dataset of one sample (see load_graph_dataset in dataset.h).
#include "trident/data/dataset.h"
#include "trident/gnn/graph_data.h"

namespace trident::data {
namespace {

torch::Tensor mask_of(const std::vector<std::uint8_t>& m) {
  return torch::from_blob(const_cast<std::uint8_t*>(m.data()), {1, static_cast<std::int64_t>(m.size())}, torch::kUInt8)
      .to(torch::kFloat32);
}

}  // namespace

Splits load_graph_dataset(const std::string& source, const std::string& eval, const std::set<std::string>& fields) {
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
  return s;
}

}  // namespace trident::data
