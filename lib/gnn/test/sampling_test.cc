// Neighbour sampling (Note [Neighbour sampling]): exact with fan-out -1, a
// pure function of (seed, epoch, layer, node), uniform, and the same on
// any number of threads.
#include "trident/gnn/sampling.h"

#include <gtest/gtest.h>

#include <map>
#include <algorithm>
#include <set>

namespace trident::gnn {
namespace {

GraphData graph() {
  CsbmOptions o;
  o.nodes = 300, o.degree = 12;
  return generate_csbm(o, false);
}

TEST(Sampling, TheCsrHoldsEachNodesInNeighbours) {
  const auto g = graph();
  const auto csr = in_neighbours(g);
  ASSERT_EQ(csr.nodes(), g.nodes);
  std::map<std::int64_t, std::vector<std::int64_t>> expected;
  for (std::int64_t e = 0; e < g.edges(); ++e) expected[g.dst[e]].push_back(g.src[e]);
  for (std::int64_t v = 0; v < g.nodes; ++v)
    EXPECT_EQ(std::vector<std::int64_t>(csr.neighbours.begin() + csr.offsets[v], csr.neighbours.begin() + csr.offsets[v + 1]),
              expected[v]) << "node " << v;
}

// With every neighbour, block l's mean weights are the rows of GraphSAGE's
// full-graph mean adjacency for its destinations.
TEST(Sampling, EveryNeighbourGivesTheFullGraphsMeanAdjacency) {
  const auto g = graph();
  const auto csr = in_neighbours(g);
  const auto full = mean_adjacency(g);
  std::map<std::pair<std::int64_t, std::int64_t>, float> entry;
  for (std::int64_t i = 0; i < full.nnz(); ++i) entry[{full.rows[i], full.cols[i]}] = full.weights[i];
  SampleOptions o;
  o.fanouts = {-1, -1};
  const auto batch = sample_blocks(csr, {5, 17, 230}, o);
  ASSERT_EQ(batch.blocks.size(), 2u);
  EXPECT_EQ(batch.blocks[1].dst, (std::vector<std::int64_t>{5, 17, 230}));
  EXPECT_EQ(batch.blocks[0].dst, batch.blocks[1].src);
  for (const auto& b : batch.blocks) {
    const auto w = b.mean_weights();
    std::int64_t edges = 0;
    for (auto d : b.dst) edges += csr.degree(d);
    ASSERT_EQ(static_cast<std::int64_t>(b.edge_dst.size()), edges);
    for (std::size_t e = 0; e < w.size(); ++e) {
      const auto it = entry.find({b.dst[b.edge_dst[e]], b.src[b.edge_src[e]]});
      ASSERT_NE(it, entry.end());
      EXPECT_FLOAT_EQ(w[e], it->second);
    }
  }
}

TEST(Sampling, ANodesSampleIsItsOwnWhateverTheBatchAndThreads) {
  const auto g = graph();
  const auto csr = in_neighbours(g);
  SampleOptions o;
  o.fanouts = {5, 3}, o.seed = 9, o.epoch = 2;
  const auto a = sample_blocks(csr, {1, 2, 3, 40}, o), b = sample_blocks(csr, {40, 77}, o);
  // Node 40's layer-1 edges are the same in both batches.
  auto edges_of = [](const Block& blk, std::int64_t v) {
    std::vector<std::int64_t> out;
    for (std::size_t e = 0; e < blk.edge_dst.size(); ++e)
      if (blk.dst[blk.edge_dst[e]] == v) out.push_back(blk.src[blk.edge_src[e]]);
    return out;
  };
  EXPECT_EQ(edges_of(a.blocks[1], 40), edges_of(b.blocks[1], 40));
  EXPECT_EQ(edges_of(a.blocks[1], 40), sample_neighbours(csr, 40, 1, o));
  EXPECT_EQ(edges_of(a.blocks[1], 40).size(), 3u);
  auto threaded = o;
  threaded.threads = 4;
  EXPECT_EQ(sample_blocks(csr, {1, 2, 3, 40}, threaded).hash(), a.hash());
  auto next = o;
  next.epoch = 3;
  EXPECT_NE(sample_blocks(csr, {1, 2, 3, 40}, next).hash(), a.hash());
}

TEST(Sampling, WithoutReplacementDistinctAndUniformWithReplacementK) {
  const auto g = graph();
  const auto csr = in_neighbours(g);
  std::int64_t v = 0;
  while (csr.degree(v) < 8) ++v;
  const auto d = csr.degree(v);
  SampleOptions o;
  o.fanouts = {3};
  std::map<std::int64_t, int> hits;
  const int epochs = 4000;
  for (int e = 0; e < epochs; ++e) {
    o.epoch = e;
    const auto s = sample_neighbours(csr, v, 0, o);
    ASSERT_EQ(s.size(), 3u);
    ASSERT_EQ(std::set<std::int64_t>(s.begin(), s.end()).size(), 3u);
    for (auto u : s) ++hits[u];
  }
  for (std::int64_t i = csr.offsets[v]; i < csr.offsets[v + 1]; ++i)  // each neighbour kept 3/d of the time
    EXPECT_NEAR(hits[csr.neighbours[i]] / double(epochs), 3.0 / d, 0.03) << "neighbour " << csr.neighbours[i];
  o.replace = true, o.fanouts = {2 * static_cast<int>(d)};
  EXPECT_EQ(static_cast<std::int64_t>(sample_neighbours(csr, v, 0, o).size()), 2 * d);
}

TEST(Sampling, BadSettingsNameTheKey) {
  const auto csr = in_neighbours(graph());
  auto refused = [&](std::vector<int> fanouts, std::vector<std::int64_t> seeds, const std::string& needle) {
    SampleOptions o;
    o.fanouts = std::move(fanouts);
    try {
      sample_blocks(csr, seeds, o);
      ADD_FAILURE() << needle << " accepted";
    } catch (const GraphDataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused({}, {1}, "model.fanouts: empty");
  refused({5, 0}, {1}, "model.fanouts[1] = 0");
  refused({-2}, {1}, "model.fanouts[0] = -2");
  refused({5}, {300}, "seed node 300 is outside the graph's 300 nodes");
}

}  // namespace
}  // namespace trident::gnn

#include "trident/gnn/rmat.h"

namespace trident::gnn {
namespace {

// R-MAT (gnn/rmat.h): symmetric, simple, power-law degrees, labels that
// follow the structure, the same graph for a seed; bad keys name rmat.
TEST(Rmat, APowerLawGraphWhoseLabelsFollowItsQuadrants) {
  const auto g = load_graph("rmat:nodes=4096,classes=4,degree=8,features=4");
  EXPECT_EQ(g.name, "rmat");
  ASSERT_EQ(g.nodes, 4096);
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  std::vector<std::int64_t> degree(g.nodes, 0);
  for (std::int64_t e = 0; e < g.edges(); ++e) {
    EXPECT_NE(g.src[e], g.dst[e]);
    EXPECT_TRUE(edges.insert({g.dst[e], g.src[e]}).second) << "a duplicate edge";
    ++degree[g.dst[e]];
  }
  for (const auto& [t, s] : edges) EXPECT_TRUE(edges.count({s, t})) << "edge " << s << " -> " << t << " one way only";
  const double mean = static_cast<double>(g.edges()) / g.nodes;
  EXPECT_NEAR(mean, 8, 0.5);
  EXPECT_GT(*std::max_element(degree.begin(), degree.end()), 8 * mean);  // the block model's stay near the mean
  // 4 classes are the top two id bits: an edge keeps both with probability
  // (0.57 + 0.05)^2 = 0.38 per R-MAT draw (0.36 measured after duplicates
  // go), against 0.25 by chance.
  EXPECT_GT(g.homophily(), 0.32);
  const auto again = load_graph("rmat:nodes=4096,classes=4,degree=8,features=4");
  EXPECT_EQ(again.src, g.src);
  EXPECT_EQ(again.x, g.x);
  EXPECT_NE(load_graph("rmat:nodes=4096,classes=4,degree=8,features=4,seed=1").src, g.src);
  try {
    load_graph("rmat:nodes=4096,fanout=3");
    ADD_FAILURE() << "an unknown key was taken";
  } catch (const GraphDataError& e) {
    EXPECT_NE(std::string(e.what()).find("graph rmat: fanout"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::gnn
