#include "trident/nn/graph_executor.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "reference_models.h"
#include "trident/zoo/zoo.h"
#include "trident/data/dataset.h"
#include "trident/gnn/graph_data.h"

namespace trident::nn {
namespace {

class Equivalence : public ::testing::TestWithParam<std::string> {};

// The graph executor on the whole graph equals a hand-written nested module
// of the same model: loss and every parameter's gradient.
TEST_P(Equivalence, WholeGraphMatchesHandWrittenModule) {
  torch::manual_seed(1);
  const std::string name = GetParam();
  auto g = zoo::build_graph({name, "tiny"});
  GraphModule gm(g);
  auto ref = reference::make(name);

  auto gm_params = gm.named_parameters();
  auto ref_params = ref->named_parameters();
  ASSERT_EQ(gm_params.size(), ref_params.size());
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : ref_params) {
      auto* mine = gm_params.find(reference::graph_name(p.key()));
      ASSERT_NE(mine, nullptr) << "graph module lacks " << p.key();
      ASSERT_EQ(mine->sizes(), p.value().sizes()) << p.key();
      p.value().copy_(*mine);
    }
  }
  auto batch = data::random_batch(g, 6);
  GraphExecutor ex(gm, graph::whole_graph(g));
  auto loss = ex.forward({}, batch).at(g.loss());
  auto ref_loss = ref->loss(batch);
  EXPECT_TRUE(torch::allclose(loss, ref_loss, 1e-6, 1e-6)) << loss.item<double>() << " vs " << ref_loss.item<double>();
  loss.backward();
  ref_loss.backward();
  for (const auto& p : ref_params) {
    const auto& mine = *gm_params.find(reference::graph_name(p.key()));
    ASSERT_TRUE(mine.grad().defined()) << p.key();
    EXPECT_TRUE(torch::allclose(mine.grad(), p.value().grad(), 1e-6, 1e-6))
        << p.key() << " max diff " << (mine.grad() - p.value().grad()).abs().max().item<double>();
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, Equivalence,
                         ::testing::Values("mlp", "cnn", "inception", "transformer", "mmt", "dlrm", "candle_uno"),
                         [](const auto& info) { return info.param; });

// Two stages (the branches of block1 and everything else) run separately,
// with the boundary tensors handed over by hand, give the whole graph's
// gradients: the executor runs any convex subgraph.
TEST(GraphExecutor, TwoStagesEqualTheWholeGraph) {
  torch::manual_seed(2);
  auto g = zoo::build_graph({"inception", "tiny"});
  GraphModule gm(g);
  auto batch = data::random_batch(g, 4);

  auto whole = GraphExecutor(gm, graph::whole_graph(g)).forward({}, batch).at(g.loss());
  whole.backward();
  std::map<std::string, torch::Tensor> expected;
  for (const auto& p : gm.named_parameters()) {
    expected[p.key()] = p.value().grad().clone();
    p.value().mutable_grad().reset();
  }

  std::set<graph::OpId> branches;
  for (graph::OpId id = 0; id < g.size(); ++id) {
    const auto& n = g.op(id).name;
    if (n.rfind("block1.b", 0) == 0) branches.insert(id);
  }
  std::set<graph::OpId> rest;
  for (graph::OpId id = 0; id < g.size(); ++id)
    if (!branches.count(id)) rest.insert(id);
  // `rest` is not convex (pool1 -> branches -> concat), so split it further:
  std::set<graph::OpId> front, back;
  for (graph::OpId id : rest) (id < *branches.begin() ? front : back).insert(id);

  GraphExecutor s0(gm, graph::make_subgraph(g, front)), s1(gm, graph::make_subgraph(g, branches)),
      s2(gm, graph::make_subgraph(g, back));
  EXPECT_THROW(graph::make_subgraph(g, rest), graph::GraphError);

  auto o0 = s0.forward({}, batch);
  TensorMap in1;
  for (auto& [id, t] : o0) in1[id] = t.detach().requires_grad_(true);
  auto o1 = s1.forward(in1, batch);
  TensorMap in2;
  for (auto& [id, t] : o1) in2[id] = t.detach().requires_grad_(true);
  auto loss = s2.forward(in2, batch).at(g.loss());
  EXPECT_TRUE(torch::allclose(loss, whole));

  loss.backward();
  std::vector<torch::Tensor> outs, grads;
  for (auto& [id, t] : o1) {
    outs.push_back(t);
    grads.push_back(in2.at(id).grad());
  }
  torch::autograd::backward(outs, grads);
  outs.clear();
  grads.clear();
  for (auto& [id, t] : o0) {
    outs.push_back(t);
    grads.push_back(in1.at(id).grad());
  }
  torch::autograd::backward(outs, grads);
  for (const auto& p : gm.named_parameters()) {
    EXPECT_TRUE(torch::allclose(p.value().grad(), expected.at(p.key()), 1e-6, 1e-6)) << p.key();
  }
}

// See Note [Inputs on demand]: a stage holding mmt's branch 0 and the head runs
// all of branch 0 before it asks for branch 1's pooled output, and computes
// what the eager forward computes.
TEST(GraphExecutor, StageInputsAreAskedForWhenFirstRead) {
  torch::manual_seed(5);
  auto g = zoo::build_graph({"mmt", "tiny"});
  GraphModule gm(g);
  std::set<graph::OpId> stage;
  for (graph::OpId id = 0; id < g.size(); ++id)
    if (g.op(id).name.rfind("branch1", 0) != 0 && g.op(id).name != "modality1") stage.insert(id);
  GraphExecutor ex(gm, graph::make_subgraph(g, stage));
  ASSERT_EQ(ex.subgraph().inputs.size(), 1u);
  const auto pooled1 = ex.subgraph().inputs[0];
  ASSERT_EQ(g.op(pooled1).name, "branch1.pool");
  auto batch = data::random_batch(g, 4);
  GraphExecutor producer(gm, graph::make_subgraph(g, [&] {
    std::set<graph::OpId> rest;
    for (graph::OpId id = 0; id < g.size(); ++id)
      if (!stage.count(id)) rest.insert(id);
    return rest;
  }()));
  const auto sent = producer.forward({}, batch).at(pooled1);

  std::vector<std::string> ran;
  ex.set_observer([&](graph::OpId id, const std::vector<torch::Tensor>&, const torch::Tensor&) {
    ran.push_back(g.op(id).name);
  });
  int asked = 0;
  auto lazy = ex.forward_on_demand([&](graph::OpId p) {
    ++asked;
    EXPECT_EQ(p, pooled1);
    ran.push_back("<asked>");
    return sent;
  }, batch);
  EXPECT_EQ(asked, 1);
  const auto at = std::find(ran.begin(), ran.end(), "<asked>") - ran.begin();
  for (std::size_t i = 0; i < ran.size(); ++i) {
    if (ran[i].rfind("branch0", 0) == 0) {
      EXPECT_LT(static_cast<long>(i), at) << ran[i] << " ran after the wait";
    }
  }
  ex.set_observer({});
  auto eager = ex.forward({{pooled1, sent}}, batch);
  // Bitwise: one executor runs the same ops on the same tensors in this process; only when the pooled input
  // arrives differs.
  EXPECT_TRUE(torch::equal(lazy.at(g.loss()), eager.at(g.loss())));
}

TEST(GraphExecutor, WrongEdgeShapeNamesTheEdge) {
  auto g = zoo::build_graph({"mlp", "tiny"});
  GraphModule gm(g);
  std::set<graph::OpId> tail;
  for (graph::OpId id = g.id_of("fc1"); id < g.size(); ++id) tail.insert(id);
  GraphExecutor ex(gm, graph::make_subgraph(g, tail));
  Batch b = {{"label", torch::zeros({3}, torch::kInt64)}};
  try {
    ex.forward({{g.id_of("fc0_relu"), torch::zeros({3, 255})}}, b);
    FAIL();
  } catch (const Failure& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'fc0_relu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3,255]"), std::string::npos) << msg;
  }
  EXPECT_THROW(ex.forward({}, b), Failure);  // input not given
}

// train.label_smoothing reaches the loss op as an attribute: the sum over
// rows of (1 − ε)·(−log p_label) + ε·mean_k(−log p_k), as torch's
// cross_entropy with label_smoothing ε.
TEST(GraphModule, LabelSmoothingFollowsTheFormula) {
  auto g = zoo::build_graph({"mlp", "tiny"});
  const double eps = 0.2;
  g.set_attr(g.loss(), "label_smoothing", eps);
  GraphModule gm(g, 3);
  auto sg = graph::whole_graph(g);
  const auto logits_id = g.op(g.loss()).inputs[0].producer;
  sg.outputs.push_back(logits_id);
  auto batch = data::random_batch(g, 5);
  const auto out = GraphExecutor(gm, sg).forward({}, batch);
  const auto logp = torch::log_softmax(out.at(logits_id).to(torch::kFloat64), 1);
  const auto nll = -logp.gather(1, batch.at("label").unsqueeze(1)).squeeze(1);
  const auto expected = ((1 - eps) * nll - eps * logp.mean(1)).sum().item<double>();
  EXPECT_NEAR(out.at(g.loss()).item<double>(), expected, 1e-4 * std::abs(expected));
  g.set_attr(g.loss(), "label_smoothing", 1.5);
  EXPECT_THROW(GraphModule(g, 3), graph::GraphError);
}

// A zoo GNN on a 60-node csbm, forward without dropout: its logits (the
// output of op `logits`), loss and batch, and its weights in float64.
struct GraphForward {
  static constexpr const char* kSource = "csbm:nodes=60,classes=3,features=4,train_per_class=5";
  graph::OpGraph g;
  GraphModule gm;
  nn::Batch batch;
  torch::Tensor logits, loss;

  GraphForward(const std::string& model, const std::string& logits_op)
      : g(zoo::build_graph({model, "tiny", "", "", kSource})), gm(g, 3) {
    auto sg = graph::whole_graph(g);
    sg.outputs.push_back(g.id_of(logits_op));
    batch = data::load_graph_dataset(kSource, "test").train.batch(torch::tensor({std::int64_t{0}}));
    torch::NoGradGuard no_grad;  // dropout off
    const auto out = GraphExecutor(gm, sg).forward({}, batch);
    logits = out.at(g.id_of(logits_op)), loss = out.at(g.loss());
  }
  torch::Tensor param(const std::string& name) { return gm.named_parameters()[name].to(torch::kFloat64); }
  torch::Tensor features() const { return batch.at("features")[0].to(torch::kFloat64); }
  // An adjacency as a dense float64 matrix.
  static torch::Tensor dense(const gnn::Adjacency& a) {
    auto m = torch::zeros({a.nodes, a.nodes}, torch::kFloat64);
    for (std::int64_t k = 0; k < a.nnz(); ++k) m[a.rows[k]][a.cols[k]] = a.weights[k];
    return m;
  }
};

// The graph ops against their formulas in float64 (Note [Graph ops] in
// zoo/builder.h): GCN-2's forward is A relu(A X W1 + b1) W2 + b2 with A the
// normalised adjacency, its loss the masked mean cross-entropy, its
// accuracy the masked share of right answers.
TEST(GraphModule, GraphOpsFollowTheirFormulas) {
  GraphForward f("gcn2", "conv1.aggregate");
  const auto a = GraphForward::dense(gnn::gcn_adjacency(gnn::load_graph(GraphForward::kSource, false)));
  const auto h = torch::relu(a.mm(f.features().mm(f.param("conv0.weight").t()) + f.param("conv0.bias")));
  const auto logits = a.mm(h.mm(f.param("conv1.weight").t()) + f.param("conv1.bias"));
  EXPECT_TRUE(torch::allclose(f.logits[0].to(torch::kFloat64), logits, 1e-5, 1e-6));
  const auto& batch = f.batch;
  const auto mask = batch.at("mask")[0].to(torch::kFloat64);
  const auto nll = -torch::log_softmax(logits, 1).gather(1, batch.at("label")[0].unsqueeze(1)).squeeze(1);
  const double loss = ((nll * mask).sum() / mask.sum()).item<double>();
  EXPECT_NEAR(f.loss.item<double>(), loss, 1e-5 * loss);
  const double right = ((logits.argmax(1).eq(batch.at("label")[0]).to(torch::kFloat64) * mask).sum() / mask.sum()).item<double>();
  EXPECT_DOUBLE_EQ(correct_predictions("masked_cross_entropy", f.logits, batch.at("label"), batch.at("mask")), right);
}

// GraphSAGE-mean (zoo: sage2) against its formula in float64: each layer
// is x W_s^T + b_s + M (x W_n^T + b_n), M the neighbours' mean D^-1 A.
TEST(GraphModule, SageFollowsItsFormula) {
  GraphForward f("sage2", "conv1.add");
  const auto mean = GraphForward::dense(gnn::mean_adjacency(gnn::load_graph(GraphForward::kSource, false)));
  auto layer = [&](const torch::Tensor& x, const std::string& l) {
    return x.mm(f.param(l + ".self.weight").t()) + f.param(l + ".self.bias") +
           mean.mm(x.mm(f.param(l + ".neigh.weight").t()) + f.param(l + ".neigh.bias"));
  };
  const auto logits = layer(torch::relu(layer(f.features(), "conv0")), "conv1");
  EXPECT_TRUE(torch::allclose(f.logits[0].to(torch::kFloat64), logits, 1e-5, 1e-6));
}

TEST(GraphModule, ParameterNamesFollowOpNames) {
  auto g = zoo::build_graph({"mmt", "tiny"});
  GraphModule gm(g);
  auto params = gm.named_parameters();
  EXPECT_NE(params.find("branch1.layer1.attn.in_proj.weight"), nullptr);
  EXPECT_NE(params.find("head.out.bias"), nullptr);
  int64_t bytes = 0;
  for (const auto& p : params) bytes += p.value().numel() * 4;
  EXPECT_EQ(bytes, g.param_bytes());
  auto fc = gm.parameters_of({g.id_of("head.fc")});
  ASSERT_EQ(fc.size(), 2u);
  EXPECT_EQ(fc[0].first, "head.fc.weight");
}

}  // namespace
}  // namespace trident::nn
