#include <algorithm>
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


namespace {

// See Note [Token losses] in graph/op_graph.h: a label per position of the
// one int64 input of the labels' shape (a sequence of ids), from a fixed
// random teacher of that position's id and the one before it -- so a model
// must look back one position (a causal language model can; a model of
// single positions cannot do better than a bigram).
torch::Tensor token_teacher(const graph::OpGraph& graph, const Batch& fields, std::int64_t classes,
                            at::Generator& gen) {
  const auto& label_spec = graph.op(graph.loss()).inputs[1].expected;
  const graph::Op* ids_op = nullptr;
  for (const auto& op : graph.ops())
    if (op.is_input() && op.attrs.value("field", op.name) != "label" && op.output == label_spec) ids_op = &op;
  if (!ids_op || label_spec.shape.size() != 1)
    throw DataError("synthetic data for model '" + graph.name() + "' (a label per position, " +
                    graph::to_string(label_spec) + "): the model needs an int64 input of the same shape, its ids");
  const auto& ids = fields.at(ids_op->attrs.value("field", ids_op->name));
  const auto range = get_checked<std::int64_t>(ids_op->attrs.at("range"));
  // Tables of range x classes logits while they are small; for a language
  // model's vocabulary (50,257 x 50,257 floats would be 10 GB each) a
  // rank-64 teacher: each id's row of 64, read out by one projection.
  const bool whole = range * classes <= (std::int64_t{1} << 24);
  const std::int64_t width = whole ? classes : 64;
  const auto now = torch::randn({range, width}, gen), before = torch::randn({range, width}, gen);
  const auto readout = whole ? torch::Tensor() : torch::randn({width, classes}, gen);
  const std::int64_t rows = ids.size(0), positions = ids.size(1);
  // In blocks of rows, so that a large vocabulary's logits never stand whole.
  const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{1} << 24) / std::max<std::int64_t>(1, positions * classes));
  auto labels = torch::empty({rows, positions}, torch::kInt64);
  using torch::indexing::Slice;
  for (std::int64_t r = 0; r < rows; r += block) {
    const auto mine = ids.slice(0, r, std::min(rows, r + block));
    auto logits = now.index_select(0, mine.flatten()).view({mine.size(0), positions, width});
    logits.index({Slice(), Slice(1)}) += before.index_select(0, mine.index({Slice(), Slice(0, -1)}).flatten())
                                             .view({mine.size(0), positions - 1, width});
    labels.slice(0, r, r + mine.size(0)).copy_((whole ? logits : torch::matmul(logits, readout)).argmax(-1));
  }
  return labels;
}

// The first train_size rows for training, the rest for testing.
Splits split(const Dataset& all, std::int64_t train_size, std::int64_t total) {
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

}  // namespace

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
  if (graph::OpGraph::per_token(graph.op(graph.loss()))) {
    all.fields["label"] = token_teacher(graph, all.fields, classes, gen);
    return split(all, train_size, total);
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
  return split(all, train_size, total);
}

}  // namespace trident::data
