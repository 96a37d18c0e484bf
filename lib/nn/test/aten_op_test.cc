// What only LibTorch can check of a captured program, at load time: a call
// marked random must take a generator (or it would run unseeded), and a list
// must be of a kind the program can build (Note [ATen programs]).
#include <gtest/gtest.h>

#include <fstream>

#include "trident/graph/op_graph.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/graph_module.h"
#include "trident/test_paths.h"

namespace trident::nn {
namespace {

using nlohmann::json;

json captured() {  // the regressor of tools/export/examples (the model fuzzer's seed)
  std::ifstream in(std::string(TRIDENT_SOURCE_DIR) + "/fuzz/corpus/model/regressor-aten.json");
  return json::parse(in);
}

// The message of building the module after `edit` of op relu's attrs; "" if it builds.
std::string refused(const std::function<void(json& attrs)>& edit) {
  auto doc = captured();
  for (auto& op : doc["ops"])
    if (op["name"] == "relu") edit(op["attrs"]);
  try {
    GraphModule module(graph::OpGraph::from_json(doc), /*seed=*/0);
    return "";
  } catch (const graph::GraphError& e) {
    return e.what();
  }
}

TEST(AtenOp, ARandomCallWithoutAGeneratorIsRefused) {
  const auto message = refused([](json& a) { a["calls"][0]["random"] = true; });
  EXPECT_NE(message.find("op 'relu' call 0: marked random, but aten::relu"), std::string::npos) << message;
  EXPECT_NE(message.find("would run unseeded"), std::string::npos) << message;
  EXPECT_EQ(refused([](json&) {}), "");
}

// A dropout mask drawn by aten::bernoulli.p from a tensor that carries a
// gradient (as a pipeline stage's received activations do): the step's
// backward runs, with the mask's zero gradient (LibTorch 2.x has no
// derivative for bernoulli.p, so called as captured it fails).
TEST(AtenOp, ABernoulliMaskOfATensorWithAGradientBacksUp) {
  auto doc = captured();
  for (auto& op : doc["ops"])
    if (op["name"] == "relu") {
      op["attrs"]["calls"] = json::array({{{"op", "aten::bernoulli"}, {"overload", "p"}, {"random", true},
                                           {"args", json::array({{{"in", 0}}, 0.5})}}});
      op["attrs"]["result"] = {{"call", 0}};
    }
  const auto g = graph::OpGraph::from_json(doc);
  GraphModule module(g, /*seed=*/0);
  GraphExecutor ex(module, graph::whole_graph(g));
  Batch batch;
  for (const auto& op : g.ops())
    if (op.is_input()) {
      std::vector<std::int64_t> shape{4};
      for (auto d : op.output.shape) shape.push_back(d);
      batch[op.name] = op.output.dtype == graph::DType::kInt64 ? torch::zeros(shape, torch::kInt64) : torch::rand(shape);
    }
  auto loss = ex.forward({}, batch).at(g.loss());
  EXPECT_NO_THROW(loss.backward());
}

TEST(AtenOp, AListOfAKindItCannotBuildIsRefused) {
  const auto message = refused([](json& a) {
    a["calls"] = json::array({{{"op", "aten::_foreach_add"}, {"overload", "ScalarList"},
                               {"args", json::array({json::array({{{"in", 0}}}), json::array({1.0})})}},
                              {{"op", "aten::relu"}, {"overload", ""}, {"args", json::array({{{"in", 0}}})}}});
    a["result"] = {{"call", 1}};
  });
  EXPECT_NE(message.find("argument 'scalars': a list of Scalar is not one trident builds"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace trident::nn
