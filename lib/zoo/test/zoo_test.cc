#include "trident/zoo/zoo.h"

#include <gtest/gtest.h>

#include "trident/graph/subgraph.h"
#include "trident/zoo/builder.h"

namespace trident::zoo {
namespace {

TEST(Zoo, EveryModelAndPresetBuildsAValidGraph) {
  for (const auto& name : model_names()) {
    for (const auto& preset : presets_of(name)) {
      SCOPED_TRACE(name + "/" + preset);
      auto g = build_graph({name, preset});
      EXPECT_NO_THROW(g.validate());
      EXPECT_GT(g.param_bytes(), 0);
      EXPECT_GT(g.forward_flops(), 0);
    }
  }
}

TEST(Zoo, UnknownModelOrPresetNamesTheAllowedValues) {
  try {
    build_graph({"resnet", "tiny"});
    FAIL();
  } catch (const graph::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: mlp, cnn"), std::string::npos) << e.what();
  }
  EXPECT_THROW(build_graph({"mlp", "huge"}), graph::GraphError);
}

TEST(Zoo, PaperSizesFollowTheGraphPipeEvaluation) {
  // MMT: 4 branches x 8 layers, hidden 1024, FFN 4096 (docs/algorithms.md §2).
  auto mmt = build_graph({"mmt", "paper"});
  EXPECT_EQ(mmt.op(mmt.id_of("branch3.layer7.fc1")).params[0].shape, (std::vector<std::int64_t>{4096, 1024}));
  EXPECT_EQ(mmt.op(mmt.id_of("modality0")).output.shape, (std::vector<std::int64_t>{256, 1024}));
  // DLRM: embedding bags of 1M rows x 64.
  auto dlrm = build_graph({"dlrm", "paper"});
  EXPECT_EQ(dlrm.op(dlrm.id_of("sparse6.bag")).param_bytes(), 1000000LL * 64 * 4);
  EXPECT_TRUE(dlrm.find("dense6.fc3").has_value());
  // CANDLE-Uno: 7 branches x 4 FF layers of 4096.
  auto uno = build_graph({"candle_uno", "paper"});
  EXPECT_EQ(uno.op(uno.id_of("branch6.fc3")).params[0].shape, (std::vector<std::int64_t>{4096, 4096}));
}

// GPT-2's sizes: 124,439,808 parameters in gpt2-124m, the head's weight being
// the token embedding's (one parameter, counted once); every preset a causal
// decoder with a label per position.
TEST(Zoo, GptHasGpt2sSizesAndATiedHead) {
  const auto g = build_graph({"gpt", "gpt2-124m"});
  EXPECT_EQ(g.param_bytes(), 124439808LL * 4);
  const auto& head = g.op(g.id_of("head"));
  ASSERT_EQ(head.params.size(), 1u);
  EXPECT_EQ(head.params[0].name, "tok.weight");
  EXPECT_EQ(head.output.shape, (std::vector<std::int64_t>{1024, 50257}));
  EXPECT_TRUE(graph::OpGraph::per_token(g.op(g.loss())));
  EXPECT_TRUE(g.op(g.id_of("layer11.attn")).attrs.value("causal", false));
  EXPECT_EQ(g.param_bytes_of({g.id_of("head")}), 50257LL * 768 * 4);
  EXPECT_EQ(g.param_bytes_of({g.id_of("tok"), g.id_of("head")}), 50257LL * 768 * 4);
  EXPECT_EQ(build_graph({"gpt", "gpt2-350m"}).op(build_graph({"gpt", "gpt2-350m"}).id_of("layer23.fc1")).params[0].shape,
            (std::vector<std::int64_t>{4096, 1024}));
  try {
    build_graph({"mlp", "gpt2-124m"});
    FAIL();
  } catch (const graph::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("preset 'gpt2-124m' is unknown for model 'mlp'; allowed: tiny, paper"),
              std::string::npos)
        << e.what();
  }
}

TEST(Zoo, BranchesAreIndependentConvexStages) {
  auto g = build_graph({"inception", "tiny"});
  // The four branches of block1 have no path between them: each alone and
  // all together are convex; one branch plus the concat and another branch's
  // reduce is not.
  std::set<graph::OpId> b2 = {g.id_of("block1.b2.reduce"), g.id_of("block1.b2.reduce_relu"),
                              g.id_of("block1.b2.conv3"), g.id_of("block1.b2.conv3_relu")};
  EXPECT_TRUE(g.is_convex(b2));
  auto sg = graph::make_subgraph(g, b2);
  EXPECT_EQ(sg.inputs, (std::vector<graph::OpId>{g.id_of("pool1")}));
  EXPECT_EQ(sg.outputs, (std::vector<graph::OpId>{g.id_of("block1.b2.conv3_relu")}));
  EXPECT_FALSE(g.is_convex({g.id_of("block1.b2.reduce"), g.id_of("block1.concat")}));
}

TEST(Builder, LinearFlopsParamsAndShapeAreExact) {
  GraphBuilder b("t");
  auto x = b.input("x", {{5, 16}, graph::DType::kFloat32});
  auto y = b.linear("fc", x, 32);
  const auto& op = b.spec(y);
  EXPECT_EQ(op.shape, (std::vector<std::int64_t>{5, 32}));
  auto label = b.input("label", {{}, graph::DType::kInt64});
  auto pooled = b.mean_seq("pool", y);
  b.cross_entropy("loss", pooled, label);
  auto g = b.finish();
  const auto& fc = g.op(g.id_of("fc"));
  EXPECT_DOUBLE_EQ(fc.forward_flops, 2.0 * 5 * 16 * 32);
  EXPECT_EQ(fc.param_bytes(), (32 * 16 + 32) * 4);
}

TEST(Builder, BadShapesAreNamed) {
  GraphBuilder b("t");
  auto x = b.input("x", {{16}, graph::DType::kFloat32});
  EXPECT_THROW(b.conv2d("c", x, 4, 3), graph::GraphError);
  auto s = b.input("s", {{4, 6}, graph::DType::kFloat32});
  try {
    b.self_attention("attn", s, 4);
    FAIL();
  } catch (const graph::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("'attn'"), std::string::npos);
  }
}

TEST(Zoo, GraphJsonRoundTripsForEveryModel) {
  for (const auto& name : model_names()) {
    auto g = build_graph({name, "tiny"});
    EXPECT_EQ(graph::OpGraph::from_json(g.to_json()).to_json(), g.to_json()) << name;
  }
}

}  // namespace
}  // namespace trident::zoo
