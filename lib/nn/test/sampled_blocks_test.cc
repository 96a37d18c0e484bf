// Sampled GNNs on blocks (Note [Sampled blocks] in nn/sampled_blocks.h):
// with every neighbour kept a batch's logits on its seeds are the full-graph
// model's on the same weights; a seed's output does not depend on the other
// seeds of its batch, with dropout on too.
#include <gtest/gtest.h>

#include "trident/data/dataset.h"
#include "trident/gnn/graph_data.h"
#include "trident/gnn/sampling.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/random.h"
#include "trident/nn/sampled_blocks.h"
#include "trident/zoo/zoo.h"

namespace trident::nn {
namespace {

const char* kSource = "csbm:nodes=90,classes=3,features=6,degree=5,train_per_class=5,seed=4";

zoo::ModelSpec spec(const std::string& name, std::vector<int> fanouts = {}) {
  zoo::ModelSpec s{name, "tiny"};
  s.graph = kSource, s.fanouts = std::move(fanouts);
  return s;
}

graph::OpId logits_of(const graph::OpGraph& g) { return g.op(g.loss()).inputs.at(0).producer; }

std::string norm_of(const graph::OpGraph& g) {
  for (const auto& op : g.ops()) {
    if (op.kind == "block_aggregate") return op.attrs.value("norm", std::string());
    if (op.kind == "block_attention") return "edges";
  }
  return "";
}

struct Graph {
  gnn::GraphData data = gnn::load_graph(kSource);
  gnn::Csr csr = gnn::in_neighbours(data);
  std::vector<std::int64_t> degrees;
  torch::Tensor x;
  Graph() {
    for (std::int64_t v = 0; v < csr.nodes(); ++v) degrees.push_back(csr.degree(v));
    x = torch::from_blob(data.x.data(), {data.nodes, data.features}, torch::kFloat32).clone();
  }
};

// The sampled model's logits on `seeds` (blocks sampled with `o`).
torch::Tensor sampled_logits(GraphModule& m, const graph::OpGraph& g, const Graph& graph,
                             const std::vector<std::int64_t>& seeds, const gnn::SampleOptions& o) {
  const auto batch = gnn::sample_blocks(graph.csr, seeds, o);
  const auto ids = torch::tensor(batch.input_nodes(), torch::kInt64);
  BlockScope scope(make_blocks(batch, norm_of(g), graph.degrees, graph.x.index_select(0, ids)));
  auto sg = graph::whole_graph(g);
  sg.outputs.push_back(logits_of(g));
  const auto node = torch::tensor(seeds, torch::kInt64);
  const auto label = torch::tensor(graph.data.labels, torch::kInt64).index_select(0, node);
  return GraphExecutor(m, sg).forward({}, {{"node", node}, {"label", label}}).at(logits_of(g));
}

gnn::SampleOptions options(std::vector<int> fanouts, std::uint64_t seed = 7) {
  gnn::SampleOptions o;
  o.fanouts = std::move(fanouts), o.seed = seed, o.epoch = 2;
  return o;
}

TEST(SampledBlocks, EveryNeighbourGivesTheFullGraphsLogits) {
  const Graph graph;
  const std::vector<std::int64_t> seeds{5, 17, 3, 42, 89, 0, 61};
  const auto whole = data::load_graph_dataset(kSource, "test");
  for (const std::string name : {"sage2", "sage3", "gcn2", "gat2"}) {
    SCOPED_TRACE(name);
    const int layers = zoo::sampled_layers(name);
    const auto full = zoo::build_graph(spec(name));
    const auto sampled = zoo::build_graph(spec(name, std::vector<int>(static_cast<std::size_t>(layers), -1)));
    GraphModule a(full, 3), b(sampled, 3);  // the same parameter names: the same weights
    a.eval(), b.eval();
    torch::NoGradGuard no_grad;
    auto sg = graph::whole_graph(full);
    sg.outputs.push_back(logits_of(full));
    const auto expect = GraphExecutor(a, sg).forward({}, whole.test.batch(torch::arange(1))).at(logits_of(full))[0];
    const auto got = sampled_logits(b, sampled, graph, seeds, options(std::vector<int>(static_cast<std::size_t>(layers), -1)));
    const auto want = expect.index_select(0, torch::tensor(seeds, torch::kInt64));
    // Sums over each row's neighbours in another order than the full graph's: float32 roundings.
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max().item<double>();
    // Sampling two neighbours changes them (the test can tell).
    const auto two = sampled_logits(b, sampled, graph, seeds, options(std::vector<int>(static_cast<std::size_t>(layers), 2)));
    EXPECT_FALSE(torch::allclose(two, want, 1e-3, 1e-4));
  }
}

// A seed's logits in a batch of others equal its logits alone: with dropout
// keyed by node (training forward, under a RandomScope) and sampled fan-outs.
TEST(SampledBlocks, ASeedsOutputDoesNotDependOnItsBatch) {
  const Graph graph;
  for (const std::string name : {"sage2", "gcn2", "gat2"}) {
    SCOPED_TRACE(name);
    const auto g = zoo::build_graph(spec(name, {3, 2}));
    GraphModule m(g, 5);
    m.train();
    RandomScope random(RandomKey{11, 4, 0});
    const auto together = sampled_logits(m, g, graph, {8, 30, 2, 77}, options({3, 2}));
    const auto alone = sampled_logits(m, g, graph, {77}, options({3, 2}));
    const auto other = sampled_logits(m, g, graph, {30, 50}, options({3, 2}));
    EXPECT_TRUE(torch::allclose(together[3], alone[0], 1e-5, 1e-6)) << (together[3] - alone[0]).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(together[1], other[0], 1e-5, 1e-6));
    // Another step draws other masks.
    RandomScope next(RandomKey{11, 5, 0});
    EXPECT_FALSE(torch::allclose(sampled_logits(m, g, graph, {77}, options({3, 2})), alone, 1e-4, 1e-5));
  }
}

TEST(SampledBlocks, ABlockOpOutsideABlockScopeIsNamed) {
  const auto g = zoo::build_graph(spec("sage2", {2, 2}));
  GraphModule m(g, 1);
  auto sg = graph::whole_graph(g);
  sg.outputs.push_back(logits_of(g));
  try {
    GraphExecutor(m, sg).forward({}, {{"node", torch::tensor({1}, torch::kInt64)}, {"label", torch::tensor({0}, torch::kInt64)}});
    FAIL() << "ran without blocks";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'features' (block_features) reads a sampled batch's blocks"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace trident::nn
