// What only LibTorch can check of a captured program, at load time: a call
// marked random must take a generator (or it would run unseeded), and a list
// must be of a kind the program can build (Note [ATen programs]).
#include <gtest/gtest.h>

#include <fstream>

#include "../src/aten_op.h"
#include "trident/base/text.h"
#include "trident/graph/constants.h"
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

// The dtypes a graph constant may have (graph/constants.h, torch-free) are
// the ones nn turns into tensors, at the same sizes: one table in each layer,
// held together here.
TEST(AtenOp, EveryConstantDtypeBecomesATensorOfItsSize) {
  nlohmann::json constants = nlohmann::json::object();
  for (const auto& [dtype, size] : graph::constant_dtypes())
    constants[dtype] = {{"dtype", dtype}, {"shape", {3}}, {"base64", base64_encode(std::string(3 * size, '\0'))}};
  graph::OpGraph g("constants");
  g.set_capture(nullptr, constants);
  const auto tensors = decode_constants(g);
  ASSERT_EQ(tensors.size(), graph::constant_dtypes().size());
  for (const auto& [dtype, size] : graph::constant_dtypes()) {
    EXPECT_EQ(tensors.at(dtype).element_size(), static_cast<std::size_t>(size)) << dtype;
    EXPECT_EQ(tensors.at(dtype).numel(), 3) << dtype;
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
