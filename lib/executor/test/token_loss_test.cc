// Note [Token losses] (graph/op_graph.h) across plans: a per-token loss whose
// ignored positions crowd some micro-batches and replicas and spare others
// trains, as a pipeline and as data parallelism, to one process's weights --
// the loss is divided by the global batch's counted tokens, never by a
// micro-batch's or a replica's own.
#include "pipeline_harness.h"

#include "trident/nn/graph_executor.h"
#include "trident/zoo/builder.h"

namespace trident::executor {
namespace {

using namespace test;  // NOLINT: the harness
using graph::DType;

constexpr std::int64_t kRows = 8, kTokens = 6, kFeatures = 5, kClasses = 7;

graph::OpGraph tagger() {
  zoo::GraphBuilder b("tagger");
  auto x = b.input("x", {{kTokens, kFeatures}, DType::kFloat32});
  x = b.activation("fc0_relu", "relu", b.linear("fc0", x, 16));
  b.cross_entropy("loss", b.linear("head", x, kClasses), b.input("label", {{kTokens}, DType::kInt64}));
  return b.finish();
}

// Micro-batches of 2 rows: the first counts 1 token of 12, the second all
// 12, the third 6, the last 2; a replica of 4 rows counts 13 or 8.
nn::Batch uneven_batch() {
  auto gen = at::detail::createCPUGenerator(9);
  auto label = torch::randint(kClasses, {kRows, kTokens}, gen, torch::kInt64);
  using torch::indexing::Slice;
  label.index_put_({Slice(0, 2)}, graph::OpGraph::kIgnoreIndex);
  label.index_put_({0, 3}, 4);
  label.index_put_({Slice(4, 6), Slice(0, 3)}, graph::OpGraph::kIgnoreIndex);
  label.index_put_({Slice(6, 8), Slice(1, kTokens)}, graph::OpGraph::kIgnoreIndex);
  return {{"x", torch::randn({kRows, kTokens, kFeatures}, gen)}, {"label", label}};
}

TEST(TokenLossPlans, UnevenlyIgnoredTokensTrainEveryPlanToOneProcesssWeights) {
  const auto g = tagger();
  const auto batch = uneven_batch();
  ASSERT_EQ(nn::loss_divisor(g.op(g.loss()), batch.at("label")), 1 + 12 + 6 + 2);
  auto first = [](const std::string& n) { return n == "x" || n.rfind("fc0", 0) == 0; };
  auto rest = [](const std::string&) { return true; };
  const std::vector<std::pair<std::string, plan::Plan>> plans = {
      {"2-stage pipeline, micro-batches of 2",
       hand_plan(g, request("pipedream", "1f1b", 2, kRows, 2, 0), {first, rest}, {1, 1})},
      {"data parallel, 2 replicas of 2 micro-batches",
       hand_plan(g, request("graphpipe", "1f1b", 2, kRows, 2, 0), {rest}, {2})},
      {"pipeline with a replicated loss stage",
       hand_plan(g, request("graphpipe", "1f1b", 3, kRows, 2, 0), {first, rest}, {1, 2})}};
  for (const auto& [what, p] : plans) {
    SCOPED_TRACE(what);
    const auto res = train(g, p, 3, 20, false, comm::Matching::kByTag, false, &batch);
    expect_equal(res, p);
  }
}

// The zoo's gpt (Note [Tied parameters]): its head reads the token
// embedding's table, so a pipeline holds that parameter on its first and its
// last stage; both start it alike (the embedding's rule, whichever op a
// stage holds) and sum its gradient, and every plan trains to one process's
// weights.
TEST(TokenLossPlans, GptWithItsHeadTiedAcrossTwoStagesEqualsOneProcess) {
  const auto g = zoo::build_graph({"gpt", "tiny"});
  auto first = [](const std::string& n) { return n == "ids" || n == "tok" || n == "pos" || n.rfind("layer0.", 0) == 0; };
  auto rest = [](const std::string&) { return true; };
  const std::vector<std::pair<std::string, plan::Plan>> plans = {
      {"2-stage pipeline", hand_plan(g, request("pipedream", "1f1b", 2, 8, 2, 0), {first, rest}, {1, 1})},
      {"data parallel", hand_plan(g, request("graphpipe", "1f1b", 2, 8, 4, 0), {rest}, {2})}};
  for (const auto& [what, p] : plans) {
    SCOPED_TRACE(what);
    const auto res = train(g, p, 3);
    expect_equal(res, p);
    if (p.stages.size() == 2) {
      EXPECT_TRUE(res.held[0].count("tok.weight") && res.held[1].count("tok.weight"));
      // Bitwise: both copies start from (seed, name) by one rule and step by the same elementwise update
      // with the same all-reduced gradient (every member of a Gloo all-reduce receives the same bits).
      EXPECT_TRUE(torch::equal(res.ranks[0].at("tok.weight"), res.ranks[1].at("tok.weight")))
          << "the two copies of the tied table drifted apart";
    }
  }
}

}  // namespace
}  // namespace trident::executor
