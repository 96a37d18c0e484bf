#include "trident/graph/op_graph.h"
#include "trident/graph/constants.h"

#include <gtest/gtest.h>

#include "trident/graph/subgraph.h"

namespace trident::graph {
namespace {

TensorSpec vec(std::int64_t n) { return {{n}, DType::kFloat32}; }

// A diamond: in -> a -> {b, c} -> d -> loss (with a label input).
struct Diamond {
  OpGraph g{"diamond"};
  OpId in, label, a, b, c, d, loss;
  Diamond() {
    in = g.add({"x", "input", {{"field", "x"}}, {}, vec(4)});
    label = g.add({"y", "input", {{"field", "label"}}, {}, {{}, DType::kInt64}});
    a = g.add({"a", "linear", {}, {{in, vec(4)}}, vec(8)});
    b = g.add({"b", "relu", {}, {{a, vec(8)}}, vec(8)});
    c = g.add({"c", "relu", {}, {{a, vec(8)}}, vec(8)});
    d = g.add({"d", "add", {}, {{b, vec(8)}, {c, vec(8)}}, vec(8)});
    loss = g.add({"loss", "cross_entropy", {}, {{d, vec(8)}, {label, {{}, DType::kInt64}}}, {{}, DType::kFloat32}});
  }
};

TEST(OpGraph, ValidDiamondPassesAndHasTopologicalOrder) {
  Diamond m;
  EXPECT_NO_THROW(m.g.validate());
  auto order = m.g.topo_order();
  ASSERT_EQ(order.size(), 7u);
  std::vector<int> pos(7);
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  for (OpId id = 0; id < m.g.size(); ++id)
    for (const auto& in : m.g.op(id).inputs) EXPECT_LT(pos[in.producer], pos[id]);
  EXPECT_EQ(m.g.loss(), m.loss);
  EXPECT_EQ(m.g.consumers(m.a), (std::vector<OpId>{m.b, m.c}));
}

// Gradients flow from the parameters down: not into the data, nor through
// ops that only read it.
TEST(OpGraph, GradientsAreCarriedFromTheFirstParameterOn) {
  OpGraph g{"chain"};
  const auto x = g.add({"x", "input", {{"field", "x"}}, {}, vec(4)});
  const auto y = g.add({"y", "input", {{"field", "label"}}, {}, {{}, DType::kInt64}});
  const auto r = g.add({"r", "relu", {}, {{x, vec(4)}}, vec(4)});
  Op fc{"fc", "linear", {}, {{r, vec(4)}}, vec(8)};
  fc.params = {{"fc.weight", {8, 4}}};
  const auto a = g.add(fc);
  const auto b = g.add({"b", "relu", {}, {{a, vec(8)}}, vec(8)});
  const auto loss = g.add({"loss", "cross_entropy", {}, {{b, vec(8)}, {y, {{}, DType::kInt64}}}, {{}, DType::kFloat32}});
  const auto carries = g.carries_gradients();
  EXPECT_FALSE(carries[x]);
  EXPECT_FALSE(carries[y]);
  EXPECT_FALSE(carries[r]);
  EXPECT_TRUE(carries[a]);
  EXPECT_TRUE(carries[b]);
  EXPECT_TRUE(carries[loss]);
}

TEST(OpGraph, ShapeMismatchAcrossAnEdgeNamesBothOps) {
  OpGraph g("bad");
  auto x = g.add({"x", "input", {}, {}, vec(4)});
  auto y = g.add({"y", "input", {}, {}, {{}, DType::kInt64}});
  auto a = g.add({"a", "linear", {}, {{x, vec(5)}}, vec(3)});
  g.add({"loss", "cross_entropy", {}, {{a, vec(3)}, {y, {{}, DType::kInt64}}}, {{}, DType::kFloat32}});
  try {
    g.validate();
    FAIL() << "expected GraphError";
  } catch (const GraphError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'x' -> 'a'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[4] float32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5] float32"), std::string::npos) << msg;
  }
}

TEST(OpGraph, RejectsDuplicateNamesUnknownInputsAndMissingLoss) {
  OpGraph g("g");
  auto x = g.add({"x", "input", {}, {}, vec(2)});
  EXPECT_THROW(g.add({"x", "relu", {}, {{x, vec(2)}}, vec(2)}), GraphError);
  EXPECT_THROW(g.add({"r", "relu", {}, {{7, vec(2)}}, vec(2)}), GraphError);
  g.add({"r", "relu", {}, {{x, vec(2)}}, vec(2)});
  EXPECT_THROW(g.validate(), GraphError);  // no loss
  EXPECT_THROW(g.id_of("nope"), GraphError);
}

TEST(OpGraph, DanglingOpIsRejected) {
  Diamond m;
  m.g.add({"dangling", "relu", {}, {{m.a, vec(8)}}, vec(8)});
  EXPECT_THROW(m.g.validate(), GraphError);
}

TEST(OpGraph, ConvexityOfSubsets) {
  Diamond m;
  EXPECT_TRUE(m.g.is_convex({m.a, m.b, m.c, m.d}));
  EXPECT_TRUE(m.g.is_convex({m.b}));
  EXPECT_TRUE(m.g.is_convex({m.b, m.c}));  // parallel branches: no path between
  EXPECT_FALSE(m.g.is_convex({m.a, m.d}));  // a -> b -> d leaves and re-enters
  EXPECT_FALSE(m.g.is_convex({m.a, m.b, m.d}));
}

TEST(Subgraph, BoundaryOfABranchStage) {
  Diamond m;
  auto sg = make_subgraph(m.g, {m.b, m.c, m.d});
  EXPECT_EQ(sg.inputs, (std::vector<OpId>{m.a}));
  EXPECT_EQ(sg.outputs, (std::vector<OpId>{m.d}));
  EXPECT_FALSE(sg.has_loss);
  auto head = make_subgraph(m.g, {m.label, m.loss});
  EXPECT_EQ(head.inputs, (std::vector<OpId>{m.d}));
  EXPECT_EQ(head.sources, (std::vector<OpId>{m.label}));
  EXPECT_TRUE(head.has_loss);
  EXPECT_THROW(make_subgraph(m.g, {m.a, m.d}), GraphError);
  EXPECT_THROW(make_subgraph(m.g, {}), GraphError);
}

TEST(OpGraph, JsonRoundTripKeepsEverything) {
  Diamond m;
  Diamond m2;
  auto doc = m2.g.to_json();
  OpGraph back = OpGraph::from_json(doc);
  EXPECT_EQ(back.to_json(), doc);
  EXPECT_EQ(back.size(), m2.g.size());
  EXPECT_EQ(back.op(m2.d).inputs[1].producer, m2.c);
}

// A captured graph's record and constants (see Note [ATen capture]) survive a
// round trip; a record that is not an object with a format is refused.
TEST(OpGraph, JsonKeepsTheCaptureAndItsConstants) {
  Diamond m;
  auto doc = m.g.to_json();
  EXPECT_FALSE(doc.contains("capture"));
  doc["capture"] = {{"by", "make_fx"}, {"format", "aten/1"}, {"torch", "1.13.0"}};
  doc["constants"] = {{"index", {{"dtype", "int64"}, {"shape", {2}}, {"base64", "AQAAAAAAAAACAAAAAAAAAA=="}}}};
  const OpGraph back = OpGraph::from_json(doc);
  EXPECT_EQ(back.capture().at("torch"), "1.13.0");
  EXPECT_EQ(back.constants().at("index").at("shape"), nlohmann::json({2}));
  EXPECT_EQ(back.to_json(), doc);
  auto bad = doc;
  bad["capture"] = "make_fx";
  EXPECT_THROW(OpGraph::from_json(bad), GraphError);
  bad = doc;
  bad["constants"] = nlohmann::json::array();
  EXPECT_THROW(OpGraph::from_json(bad), GraphError);
}

// Every constant is decoded and checked as the graph enters (graph/constants.h):
// the error names the constant and what is wrong with it.
TEST(OpGraph, EveryConstantIsCheckedWhereTheGraphEnters) {
  Diamond m;
  auto doc = m.g.to_json();
  doc["capture"] = {{"by", "make_fx"}, {"format", "aten/1"}, {"torch", "2.15.0"}};
  const nlohmann::json good = {{"dtype", "int64"}, {"shape", {2}}, {"base64", "AQAAAAAAAAACAAAAAAAAAA=="}};
  const auto c = decode_constant("index", good);
  EXPECT_EQ(c.shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(c.bytes.size(), 16u);
  EXPECT_EQ(c.bytes[8], 2);
  auto refused = [&](nlohmann::json constant, const std::string& needle) {
    doc["constants"] = {{"index", constant}};
    try {
      OpGraph::from_json(doc);
      ADD_FAILURE() << "accepted " << constant.dump();
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find("graph constant 'index'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto with = [&](const char* key, nlohmann::json value) {
    auto j = good;
    if (value.is_null()) j.erase(key); else j[key] = value;
    return j;
  };
  refused(with("base64", "!AAAAAAAAAAACAAAAAAAAAA="), "'base64' is not base64 text");
  refused(with("dtype", nullptr), "has no 'dtype'");
  refused(with("dtype", "complex64"), "dtype 'complex64' is not one trident reads");
  refused(with("shape", {3}), "holds 16 bytes; its shape [3] and dtype int64 need 24");
  refused(with("shape", {-2}), "must hold sizes >= 0");
  refused(with("shape", "2"), "'shape' must be a list");
  refused(nlohmann::json::array(), "must be an object");
}

TEST(OpGraph, JsonErrorsNameTheField) {
  Diamond m;
  auto doc = m.g.to_json();
  doc["ops"][2]["inputs"][0]["op"] = "nowhere";
  try {
    OpGraph::from_json(doc);
    FAIL();
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'nowhere'"), std::string::npos);
  }
  auto bad_format = m.g.to_json();
  bad_format["format"] = "x";
  EXPECT_THROW(OpGraph::from_json(bad_format), GraphError);
}

// Found by fuzz_model: sizes whose product overflows int64 were read, and
// the planner's byte counts then overflowed (undefined behaviour).
TEST(OpGraph, JsonShapesMustFitInt64) {
  Diamond m;
  auto huge = m.g.to_json();
  huge["ops"][0]["output"]["shape"] = {4000000000, 4000000000, 4000000000};
  EXPECT_THROW(OpGraph::from_json(huge), GraphError);
  auto negative = m.g.to_json();
  negative["ops"][0]["output"]["shape"] = {-1, 4};
  EXPECT_THROW(OpGraph::from_json(negative), GraphError);
  auto big_param = m.g.to_json();
  big_param["ops"][2]["params"] = {
      {{"name", "a.weight"}, {"shape", {std::int64_t{1} << 20, std::int64_t{1} << 17}}, {"dtype", "float32"}}};
  EXPECT_THROW(OpGraph::from_json(big_param), GraphError);
  EXPECT_NO_THROW(check_shape({std::int64_t{1} << 18, std::int64_t{1} << 18}, "x"));
  EXPECT_THROW(check_shape({std::int64_t{1} << 18, (std::int64_t{1} << 18) + 1}, "x"), GraphError);
  EXPECT_NO_THROW(check_shape({0, std::int64_t{1} << 62}, "x"));  // empty: no elements
}

}  // namespace
}  // namespace trident::graph
