// Note [Token losses] (graph/op_graph.h): a cross_entropy over [T, C] logits
// per sample is the sum over the positions whose label is not ignore_index,
// and divided by nn::loss_divisor it is PyTorch's mean over the counted
// tokens, with PyTorch's gradients; accuracy counts the same positions.
#include <gtest/gtest.h>

#include "trident/nn/graph_executor.h"
#include "trident/nn/graph_module.h"
#include "trident/zoo/builder.h"
#include "trident/zoo/zoo.h"

namespace trident::nn {
namespace {

using graph::DType;

constexpr std::int64_t kRows = 4, kTokens = 6, kFeatures = 5, kClasses = 7;

// A tagger: every position's features through two linears to its class logits.
graph::OpGraph tagger() {
  zoo::GraphBuilder b("tagger");
  auto x = b.input("x", {{kTokens, kFeatures}, DType::kFloat32});
  x = b.activation("fc0_relu", "relu", b.linear("fc0", x, 8));
  b.cross_entropy("loss", b.linear("head", x, kClasses), b.input("label", {{kTokens}, DType::kInt64}));
  return b.finish();
}

// Labels with ignored positions: none in row 0, all but one in row 1, some elsewhere.
Batch batch_with_ignored(std::int64_t ignore) {
  auto gen = at::detail::createCPUGenerator(5);
  auto label = torch::randint(1, kClasses, {kRows, kTokens}, gen, torch::kInt64);  // 0 only where ignored
  label.index_put_({1, torch::indexing::Slice(1, torch::indexing::None)}, ignore);
  label.index_put_({2, 0}, ignore);
  label.index_put_({3, torch::indexing::Slice(0, 3)}, ignore);
  return {{"x", torch::randn({kRows, kTokens, kFeatures}, gen)}, {"label", label}};
}

TEST(TokenLoss, DividedByTheCountedTokensItIsPyTorchsMeanWithItsGradients) {
  for (const std::int64_t ignore : {graph::OpGraph::kIgnoreIndex, std::int64_t{0}}) {
    SCOPED_TRACE("ignore_index " + std::to_string(ignore));
    auto g = tagger();
    g.set_attr(g.loss(), "ignore_index", ignore);
    ASSERT_TRUE(graph::OpGraph::per_token(g.op(g.loss())));
    GraphModule m(g, 3);
    const auto batch = batch_with_ignored(ignore);
    const auto labels = batch.at("label");
    const double counted = labels.ne(ignore).sum().item<double>();
    ASSERT_EQ(counted, 24 - 5 - 1 - 3);
    EXPECT_EQ(loss_divisor(g.op(g.loss()), labels), counted);

    auto sg = graph::whole_graph(g);
    const auto head = g.id_of("head");
    sg.outputs.push_back(head);
    GraphExecutor ex(m, sg);
    auto out = ex.forward({}, batch);
    (out.at(g.loss()) / loss_divisor(g.op(g.loss()), labels)).backward();
    std::map<std::string, torch::Tensor> mine;
    for (const auto& p : m.named_parameters()) mine[p.key()] = p.value().grad().clone(), p.value().mutable_grad().zero_();

    // PyTorch's own mean, on logits from a second forward.
    const auto logits = ex.forward({}, batch).at(head);
    const auto mean = torch::nn::functional::cross_entropy(
        logits.reshape({-1, kClasses}), labels.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ignore));
    mean.backward();
    EXPECT_NEAR(out.at(g.loss()).item<double>() / counted, mean.item<double>(), 1e-6);
    for (const auto& p : m.named_parameters())
      EXPECT_TRUE(torch::allclose(mine.at(p.key()), p.value().grad(), 1e-6, 1e-7)) << p.key();

    // Accuracy counts the same positions: one labelled ignore_index is never
    // right, even where that label is the argmax.
    const auto predicted = logits.argmax(-1);
    const double right = predicted.eq(labels).logical_and(labels.ne(ignore)).sum().item<double>();
    EXPECT_EQ(correct_predictions("cross_entropy", logits, labels, {}, ignore), right);
    EXPECT_EQ(correct_predictions("cross_entropy", logits, predicted, {}, ignore),
              predicted.ne(ignore).sum().item<double>());
  }
}

// A batch whose every position is ignored divides by 1: a loss of 0, not nan.
TEST(TokenLoss, ABatchOfIgnoredTokensDividesByOne) {
  const auto g = tagger();
  EXPECT_EQ(loss_divisor(g.op(g.loss()), torch::full({2, kTokens}, graph::OpGraph::kIgnoreIndex)), 1);
  // A per-sample loss divides by the rows.
  zoo::GraphBuilder b("classifier");
  b.cross_entropy("loss", b.linear("head", b.input("x", {{kFeatures}, DType::kFloat32}), kClasses),
                  b.input("label", {{}, DType::kInt64}));
  const auto c = b.finish();
  EXPECT_FALSE(graph::OpGraph::per_token(c.op(c.loss())));
  EXPECT_EQ(loss_divisor(c.op(c.loss()), torch::zeros({9}, torch::kInt64)), 9);
}

// gpt's attention is causal: changing the id at position 20 leaves every
// logit before it as it was and changes the ones from it on.
TEST(TokenLoss, GptsLogitsAtAPositionReadNoLaterId) {
  const auto g = zoo::build_graph({"gpt", "tiny"});
  GraphModule m(g, 1);
  auto sg = graph::whole_graph(g);
  const auto head = g.id_of("head");
  sg.outputs.push_back(head);
  GraphExecutor ex(m, sg);
  torch::NoGradGuard no_grad;
  auto gen = at::detail::createCPUGenerator(2);
  auto ids = torch::randint(64, {2, 32}, gen, torch::kInt64);
  Batch batch{{"ids", ids}, {"label", torch::zeros({2, 32}, torch::kInt64)}};
  const auto before = ex.forward({}, batch).at(head);
  batch["ids"] = ids.clone();
  batch["ids"].index_put_({torch::indexing::Slice(), 20}, (ids.index({torch::indexing::Slice(), 20}) + 1) % 64);
  const auto after = ex.forward({}, batch).at(head);
  using torch::indexing::Slice;
  // Bitwise: the same forward in this process on inputs equal up to position 20; a causal mask leaves
  // the earlier positions' arithmetic untouched.
  EXPECT_TRUE(torch::equal(before.index({Slice(), Slice(0, 20)}), after.index({Slice(), Slice(0, 20)})));
  for (int t = 20; t < 32; ++t)
    EXPECT_FALSE(torch::equal(before.index({Slice(), t}), after.index({Slice(), t}))) << "position " << t;
}

// The causal self_attention (LibTorch's fused attention) computes what its
// definition says: softmax(q k^T / sqrt(dh)) with the later positions masked
// out, written here with the op's own in_proj and out_proj, and so do its
// gradients.
TEST(TokenLoss, CausalSelfAttentionIsTheMaskedSoftmaxWrittenOut) {
  constexpr std::int64_t kSeq = 9, kHidden = 8, kHeads = 2, kHead = kHidden / kHeads;
  zoo::GraphBuilder b("attention");
  auto x = b.input("x", {{kSeq, kHidden}, DType::kFloat32});
  b.cross_entropy("loss", b.self_attention("attn", x, kHeads, true), b.input("label", {{kSeq}, DType::kInt64}));
  const auto g = b.finish();
  GraphModule m(g, 3);
  auto sg = graph::whole_graph(g);
  const auto attn = g.id_of("attn");
  sg.outputs.push_back(attn);
  GraphExecutor ex(m, sg);
  auto gen = at::detail::createCPUGenerator(4);
  const auto input = torch::randn({3, kSeq, kHidden}, gen).requires_grad_();
  const auto out = ex.forward({}, {{"x", input}, {"label", torch::zeros({3, kSeq}, torch::kInt64)}}).at(attn);
  std::map<std::string, torch::Tensor> p;
  for (const auto& [name, t] : m.parameters_of({attn})) p[name] = t;
  const auto in_w = p.at("attn.in_proj.weight"), in_b = p.at("attn.in_proj.bias");
  const auto qkv = torch::nn::functional::linear(input, in_w, in_b).view({3, kSeq, 3, kHeads, kHead}).permute({2, 0, 3, 1, 4});
  auto scores = torch::matmul(qkv[0], qkv[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(kHead));
  scores = scores.masked_fill(torch::ones({kSeq, kSeq}, torch::kBool).triu(1), -std::numeric_limits<double>::infinity());
  const auto mixed = torch::matmul(torch::softmax(scores, -1), qkv[2]).transpose(1, 2).reshape({3, kSeq, kHidden});
  const auto want = torch::nn::functional::linear(mixed, p.at("attn.out_proj.weight"), p.at("attn.out_proj.bias"));
  EXPECT_TRUE(torch::allclose(out, want, 1e-5, 1e-6)) << (out - want).abs().max().item<double>();
  const auto upstream = torch::randn({3, kSeq, kHidden}, gen);
  const auto ours = torch::autograd::grad({out}, {input, in_w}, {upstream});
  const auto theirs = torch::autograd::grad({want}, {input, in_w}, {upstream});
  for (int i = 0; i < 2; ++i)
    EXPECT_TRUE(torch::allclose(ours[i], theirs[i], 1e-5, 1e-6)) << i << ": " << (ours[i] - theirs[i]).abs().max().item<double>();
}

TEST(TokenLoss, LabelsMustHaveTheLogitsShapeWithoutTheClasses) {
  zoo::GraphBuilder b("bad");
  auto logits = b.linear("head", b.input("x", {{kTokens, kFeatures}, DType::kFloat32}), kClasses);
  try {
    b.cross_entropy("loss", logits, b.input("label", {{}, DType::kInt64}));
    FAIL() << "a [] label for [6, 7] logits was taken";
  } catch (const graph::GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("int64 labels of the logits' shape without its last axis"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident::nn
