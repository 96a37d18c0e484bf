#include <cmath>
#include "trident/base/json.h"

#include "trident/data/dataset.h"
#include "trident/tensor/spec.h"

namespace trident::data {

Batch random_batch(const graph::OpGraph& graph, std::int64_t rows, at::Generator gen) {
  const auto classes = graph.op(graph.loss()).inputs[0].expected.shape.back();
  Batch b;
  for (const auto& op : graph.ops()) {
    if (!op.is_input()) continue;
    std::vector<int64_t> shape = {rows};
    shape.insert(shape.end(), op.output.shape.begin(), op.output.shape.end());
    const std::string field = op.attrs.value("field", op.name);
    if (field == "label") {
      b[field] = torch::randint(classes, shape, gen, torch::kInt64);
    } else if (op.output.dtype == graph::DType::kInt64) {
      const auto range = value_checked(op.attrs, "range", std::int64_t{0});
      if (range <= 0) throw graph::GraphError("int64 input '" + field + "' needs a positive attr 'range'");
      b[field] = torch::randint(range, shape, gen, torch::kInt64);
    } else {
      b[field] = torch::randn(shape, gen).to(tensor::to_torch(op.output.dtype));
    }
  }
  return b;
}


Splits make_synthetic(const graph::OpGraph& graph, std::int64_t train_size, std::int64_t test_size,
                      std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const std::int64_t classes = graph.op(graph.loss()).inputs[0].expected.shape.back();
  const std::int64_t total = train_size + test_size;
  Dataset all;
  all.name = "synthetic";
  all.num_classes = classes;
  try {
    all.fields = random_batch(graph, total, gen);
  } catch (const graph::GraphError& e) {
    throw DataError("synthetic data: " + e.message());
  }
  // The teacher: a random read-out of every input field; its argmax is the label.
  auto logits = torch::zeros({total, classes});
  for (const auto& op : graph.ops()) {
    const std::string field = op.attrs.value("field", op.name);
    if (!op.is_input() || field == "label") continue;
    const auto& x = all.fields.at(field);
    const std::int64_t per_sample = op.output.elements();
    if (op.output.dtype == graph::DType::kInt64) {
      auto table = torch::randn({get_checked<std::int64_t>(op.attrs.at("range")), classes}, gen) * 2.0;
      logits += table.index_select(0, x.flatten()).view({total, per_sample, classes}).mean(1);
    } else {
      auto w = torch::randn({per_sample, classes}, gen) * (2.0 / std::sqrt(static_cast<double>(per_sample)));
      logits += torch::tanh(x.to(torch::kFloat32).view({total, per_sample})).matmul(w);
    }
  }
  all.fields["label"] = logits.argmax(1);
  Splits s;
  s.train = s.test = all;
  s.train.fields.clear();
  s.test.fields.clear();
  for (const auto& [name, t] : all.fields) {
    s.train.fields[name] = t.slice(0, 0, train_size).contiguous();
    s.test.fields[name] = t.slice(0, train_size, total).contiguous();
  }
  return s;
}

}  // namespace trident::data
