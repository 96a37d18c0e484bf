#include <cmath>

#include "trident/data/dataset.h"
#include "trident/nn/executor.h"

namespace trident::data {

std::int64_t synthetic_bytes(const graph::OpGraph& graph, std::int64_t samples) {
  std::int64_t per_sample = 0;
  for (const auto& op : graph.ops())
    if (op.is_input()) per_sample += op.output.bytes();
  return per_sample * samples;
}

Splits make_synthetic(const graph::OpGraph& graph, std::int64_t train_size, std::int64_t test_size,
                      std::uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const std::int64_t classes = graph.op(graph.loss()).inputs[0].expected.shape.at(0);
  const std::int64_t total = train_size + test_size;
  Dataset all;
  all.name = "synthetic";
  all.num_classes = classes;
  auto logits = torch::zeros({total, classes});
  for (const auto& op : graph.ops()) {
    if (!op.is_input()) continue;
    const std::string field = op.attrs.value("field", op.name);
    if (field == "label") continue;
    std::vector<std::int64_t> shape = {total};
    shape.insert(shape.end(), op.output.shape.begin(), op.output.shape.end());
    const std::int64_t per_sample = op.output.elements();
    if (op.output.dtype == graph::DType::kInt64) {
      const std::int64_t range = op.attrs.value("range", std::int64_t{0});
      if (range <= 0) throw DataError("synthetic data: int64 input '" + field + "' needs a positive attr 'range'");
      auto ids = torch::randint(range, shape, gen, torch::kInt64);
      auto table = torch::randn({range, classes}, gen) * 2.0;
      logits += table.index_select(0, ids.flatten()).view({total, per_sample, classes}).mean(1);
      all.fields[field] = ids;
    } else {
      auto x = torch::randn(shape, gen);
      auto w = torch::randn({per_sample, classes}, gen) * (2.0 / std::sqrt(static_cast<double>(per_sample)));
      logits += torch::tanh(x.view({total, per_sample})).matmul(w);
      all.fields[field] = x.to(nn::to_torch(op.output.dtype));
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
