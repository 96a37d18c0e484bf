// The zoo's GNNs (gnn_models.cc): sizes come from the graph, the adjacency
// is a graph constant that survives JSON, and the DAG shapes the plans rely
// on — H0 feeding every GCNII layer, every JK layer feeding the head.
#include <gtest/gtest.h>

#include "trident/base/text.h"
#include "trident/gnn/graph_data.h"
#include "trident/zoo/zoo.h"

namespace trident::zoo {
namespace {

const char* kGraph = "csbm:nodes=120,classes=4,features=10,train_per_class=5";

TEST(GnnModels, SizesAndAdjacencyComeFromTheGraph) {
  const auto g = build_graph({"gcn2", "tiny", "", "", kGraph});
  EXPECT_EQ(g.op(g.id_of("features")).output.shape, (std::vector<std::int64_t>{120, 10}));
  EXPECT_EQ(g.op(g.id_of("conv1")).output.shape, (std::vector<std::int64_t>{120, 4}));
  const auto a = gnn::gcn_adjacency(gnn::load_graph(kGraph, false));
  const auto& c = g.constants();
  EXPECT_EQ(c.at("adjacency.weight").at("shape"), nlohmann::json::array({a.nnz()}));
  const auto bytes = base64_decode(c.at("adjacency.weight").at("base64").get<std::string>());
  ASSERT_EQ(bytes.size(), a.weights.size() * 4);
  EXPECT_EQ(std::memcmp(bytes.data(), a.weights.data(), bytes.size()), 0);
  EXPECT_EQ(g.op(g.id_of("conv0.aggregate")).attrs.at("nnz"), a.nnz());
  // The constants travel with the graph's JSON.
  const auto back = graph::OpGraph::from_json(g.to_json());
  EXPECT_EQ(back.constants(), g.constants());
  // Another graph, other sizes; a bad one is bad input naming the key.
  EXPECT_EQ(build_graph({"gcn2", "tiny", "", "", "csbm:nodes=300"}).op(0).output.shape[0], 300);
  EXPECT_THROW(build_graph({"gcn2", "tiny", "", "", "csbm:nodez=3"}), gnn::GraphDataError);
}

// GraphSAGE's aggregator is the neighbours' mean: each row of its constant
// holds 1/in-degree at every in-neighbour and nothing on the diagonal.
TEST(GnnModels, SageAveragesTheNeighbours) {
  const auto g = build_graph({"sage2", "tiny", "", "", kGraph});
  const auto data = gnn::load_graph(kGraph, false);
  const auto a = gnn::constant_adjacency(g);
  EXPECT_EQ(g.op(g.id_of("conv0.aggregate")).attrs.at("adjacency"), "adjacency");
  EXPECT_EQ(a.nnz(), data.edges());  // no self loops in the csbm, none added
  std::vector<double> row_sum(120, 0.0);
  std::vector<int> degree(120, 0);
  for (std::int64_t k = 0; k < a.nnz(); ++k) {
    EXPECT_NE(a.rows[k], a.cols[k]);
    row_sum[a.rows[k]] += a.weights[k], ++degree[a.rows[k]];
  }
  for (int i = 0; i < 120; ++i) EXPECT_NEAR(row_sum[i], degree[i] ? 1.0 : 0.0, 1e-6) << "node " << i;
  EXPECT_EQ(g.op(g.id_of("conv1.add")).output.shape, (std::vector<std::int64_t>{120, 4}));
}

TEST(GnnModels, BranchesAreFanOutsAndFanIns) {
  const auto gcnii = build_graph({"gcnii16", "tiny", "", "", kGraph});
  EXPECT_EQ(gcnii.consumers(gcnii.id_of("input.relu")).size(), 17u);  // conv1's dropout and 16 mixes
  const auto jk = build_graph({"jk_gcn16", "tiny", "", "", kGraph});
  EXPECT_EQ(jk.op(jk.id_of("jump")).inputs.size(), 16u);
  EXPECT_EQ(jk.op(jk.id_of("jump")).output.shape, (std::vector<std::int64_t>{120, 16 * 16}));
  const auto deep = build_graph({"gcnii200", "tiny", "", "", kGraph});
  EXPECT_TRUE(deep.find("conv200"));
  for (const auto* bad : {"gcnii0", "gcnii01", "gcnii2000", "jk_gcn", "gcnii-3"}) {
    EXPECT_FALSE(is_gnn_model(bad)) << bad;
    EXPECT_THROW(build_graph({bad, "tiny"}), graph::GraphError) << bad;
  }
}

}  // namespace
}  // namespace trident::zoo
