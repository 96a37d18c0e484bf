// See tokens.h.
#include "trident/data/tokens.h"

#include "trident/base/json.h"
#include "trident/data/npy.h"

namespace trident::data {

std::string token_field(const graph::OpGraph& graph) {
  const auto& loss = graph.op(graph.loss());
  if (!graph::OpGraph::per_token(loss))
    throw DataError("data.name = tokens: model '" + graph.name() + "' has no loss per position (its loss is " +
                    loss.kind + " over " + graph::to_string(loss.inputs.at(0).expected) +
                    "); token files train language models, e.g. model.name=gpt");
  const auto& labels = loss.inputs.at(1).expected;
  for (const auto& op : graph.ops()) {
    const auto field = op.attrs.value("field", op.name);
    if (op.is_input() && field != "label" && op.output == labels && op.attrs.contains("range")) return field;
  }
  throw DataError("data.name = tokens: model '" + graph.name() + "' has no int64 input of its labels' shape " +
                  graph::to_string(labels) + " with a range (the token ids)");
}

TokenInput token_input(const graph::OpGraph& graph) {
  TokenInput t;
  t.field = token_field(graph);
  t.positions = graph.op(graph.loss()).inputs.at(1).expected.shape.at(0);
  for (const auto& op : graph.ops())
    if (op.is_input() && op.attrs.value("field", op.name) == t.field)
      t.range = value_checked(op.attrs, "range", std::int64_t{0});
  return t;
}

namespace {

Dataset load_split(const graph::OpGraph& graph, const std::string& file, const std::set<std::string>& fields) {
  const auto [ids, positions, range] = token_input(graph);
  const auto rows = read_npy(file);
  if (rows.scalar_type() != torch::kInt64 || rows.dim() != 2 || rows.size(1) != positions + 1)
    throw DataError(file + ": holds " + c10::str(rows.scalar_type()) + " " + c10::str(rows.sizes()) +
                    "; model '" + graph.name() + "' reads int64 token ids [N, " + std::to_string(positions + 1) +
                    "] (its " + std::to_string(positions) + " positions and the next token)");
  if (rows.numel() && (rows.min().item<std::int64_t>() < 0 || rows.max().item<std::int64_t>() >= range)) {
    const auto bad = rows.lt(0).logical_or(rows.ge(range));
    throw DataError(file + ": holds token id " + std::to_string(rows.masked_select(bad)[0].item<std::int64_t>()) +
                    "; model '" + graph.name() + "' takes ids from 0 to " + std::to_string(range - 1));
  }
  Dataset d;
  d.name = "tokens";
  d.num_classes = graph.op(graph.loss()).inputs.at(0).expected.shape.back();
  if (fields.count(ids)) d.fields[ids] = rows.slice(1, 0, positions).contiguous();
  if (fields.count("label")) d.fields["label"] = rows.slice(1, 1, positions + 1).contiguous();
  return d;
}

}  // namespace

Splits load_tokens(const graph::OpGraph& graph, const std::string& train_file, const std::string& test_file,
                   const std::set<std::string>& fields) {
  return {load_split(graph, train_file, fields), load_split(graph, test_file, fields)};
}

}  // namespace trident::data
