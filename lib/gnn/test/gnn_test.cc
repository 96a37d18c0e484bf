// Graphs as data (Note [Graphs as data] in gnn/graph_data.h): the generator
// is seeded and does what its options say; a graph directory round-trips;
// every bad file is refused naming the file and the field; GCN's
// normalisation on a graph small enough to check by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "trident/base/files.h"
#include "trident/gnn/graph_data.h"

namespace trident::gnn {
namespace {

std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("trident-gnn-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(Csbm, SeededBalancedAndAsAsked) {
  const auto a = load_graph("csbm:nodes=300,classes=3,homophily=0.9,seed=4");
  const auto b = load_graph("csbm:nodes=300,classes=3,homophily=0.9,seed=4");
  const auto c = load_graph("csbm:nodes=300,classes=3,homophily=0.9,seed=5");
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_NE(a.src, c.src);
  EXPECT_EQ(a.nodes, 300);
  EXPECT_EQ(a.x.size(), 300u * 16u);
  for (std::int64_t k = 0; k < 3; ++k) EXPECT_EQ(std::count(a.labels.begin(), a.labels.end(), k), 100);
  EXPECT_EQ(GraphData::count(a.train), 60);
  EXPECT_EQ(GraphData::count(a.val), 80);
  EXPECT_EQ(GraphData::count(a.test), 160);
  EXPECT_NEAR(a.homophily(), 0.9, 0.05);
  EXPECT_NEAR(load_graph("csbm:nodes=300,classes=3,homophily=0.3").homophily(), 0.3, 0.06);
  EXPECT_NEAR(static_cast<double>(a.edges()) / 300, 6, 0.01);  // mean degree
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  for (std::int64_t k = 0; k < a.edges(); ++k) edges.insert({a.src[k], a.dst[k]});
  for (const auto& [s, t] : edges) EXPECT_TRUE(edges.count({t, s})) << s << " -> " << t;
  for (std::int64_t k = 0; k < a.edges(); ++k) EXPECT_NE(a.src[k], a.dst[k]);
  // Ordered: node i's class is i * classes / nodes, so a contiguous third
  // of the nodes is one community.
  const auto ordered = load_graph("csbm:nodes=300,classes=3,homophily=0.9,seed=4,ordered=1");
  for (std::int64_t i = 0; i < 300; ++i) EXPECT_EQ(ordered.labels[i], i / 100) << i;
  // Without features: the same graph, no matrix.
  const auto bare = load_graph("csbm:nodes=300,classes=3,homophily=0.9,seed=4", false);
  EXPECT_TRUE(bare.x.empty());
  EXPECT_EQ(bare.src, a.src);
  EXPECT_EQ(bare.train, a.train);
}

TEST(Csbm, BadOptionsNameTheKey) {
  for (const auto& [source, key] : std::vector<std::pair<std::string, std::string>>{
           {"csbm:nodez=3", "nodez"}, {"csbm:nodes=ten", "nodes"}, {"csbm:classes=1", "classes"},
           {"csbm:homophily=1.5", "homophily"}, {"csbm:nodes=20", "nodes"}, {"csbm:degree=0", "degree"}}) {
    try {
      load_graph(source);
      ADD_FAILURE() << "accepted " << source;
    } catch (const GraphDataError& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
      EXPECT_NE(std::string(e.what()).find(key + " = "), std::string::npos) << e.what();
    }
  }
}

TEST(GraphDir, RoundTrips) {
  const auto g = load_graph("csbm:nodes=90,classes=3,features=5,train_per_class=5");
  const auto dir = temp_dir("roundtrip");
  write_graph_dir(g, dir);
  const auto r = read_graph_dir(dir);
  EXPECT_EQ(r.nodes, g.nodes);
  EXPECT_EQ(r.classes, g.classes);
  EXPECT_EQ(r.x, g.x);
  EXPECT_EQ(r.labels, g.labels);
  EXPECT_EQ(r.src, g.src);
  EXPECT_EQ(r.dst, g.dst);
  EXPECT_EQ(r.train, g.train);
  EXPECT_EQ(r.val, g.val);
  EXPECT_EQ(r.test, g.test);
  std::filesystem::remove_all(dir);
}

// A valid directory, then one file replaced by `bad`: the error names `file`
// and says `what`.
void expect_refused(const std::string& name, const std::function<void(GraphData&, const std::string&)>& spoil,
                    const std::string& file, const std::string& what) {
  SCOPED_TRACE(name);
  auto g = load_graph("csbm:nodes=60,classes=3,features=4,train_per_class=5");
  const auto dir = temp_dir(name);
  spoil(g, dir);
  try {
    read_graph_dir(dir);
    ADD_FAILURE() << "accepted";
  } catch (const GraphDataError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBadInput);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(GraphDir, BadFilesNameTheFileAndField) {
  expect_refused("range", [](GraphData& g, const std::string& d) { g.dst[3] = 60, write_graph_dir(g, d); },
                 "edges.npy", "has target 60, outside 0..59");
  expect_refused("asymmetric",
                 [](GraphData& g, const std::string& d) {
                   g.src.pop_back(), g.dst.pop_back();
                   write_graph_dir(g, d);
                 },
                 "edges.npy", "has no reverse edge");
  expect_refused("overlap", [](GraphData& g, const std::string& d) {
    for (std::size_t i = 0; i < g.train.size(); ++i)
      if (g.train[i]) { g.test[i] = 1; break; }
    write_graph_dir(g, d);
  }, "train_mask.npy and test_mask.npy", "overlap at node");
  expect_refused("duplicate", [](GraphData& g, const std::string& d) {
    g.src.push_back(g.src[0]), g.dst.push_back(g.dst[0]);
    write_graph_dir(g, d);
  }, "edges.npy", "listed twice");
  expect_refused("mask value", [](GraphData& g, const std::string& d) { g.val[2] = 2, write_graph_dir(g, d); },
                 "val_mask.npy", "holds 2");
  expect_refused("no train", [](GraphData& g, const std::string& d) {
    std::fill(g.train.begin(), g.train.end(), 0);
    write_graph_dir(g, d);
  }, "train_mask.npy", "no node");
  expect_refused("labels", [](GraphData& g, const std::string& d) {
    write_graph_dir(g, d);
    g.labels.pop_back(), g.nodes -= 1;
    const auto dir2 = d + "/short";
    std::filesystem::create_directories(dir2);
    write_graph_dir(g, dir2);
    std::filesystem::copy_file(dir2 + "/labels.npy", d + "/labels.npy", std::filesystem::copy_options::overwrite_existing);
  }, "labels.npy", "it must be int64 [60]");
  expect_refused("features dtype", [](GraphData& g, const std::string& d) {
    write_graph_dir(g, d);
    std::filesystem::copy_file(d + "/labels.npy", d + "/features.npy", std::filesystem::copy_options::overwrite_existing);
  }, "features.npy", "float32 [nodes, features]");
  // Declared asymmetric: the reverse edges are added.
  auto g = load_graph("csbm:nodes=60,classes=3,features=4,train_per_class=5");
  const auto dir = temp_dir("directed");
  auto half = g;
  half.src.clear(), half.dst.clear();
  for (std::int64_t k = 0; k < g.edges(); ++k)
    if (g.src[k] < g.dst[k]) half.src.push_back(g.src[k]), half.dst.push_back(g.dst[k]);
  write_graph_dir(half, dir);
  write_file_atomic(dir + "/graph.json", "{\"symmetric\": false}");
  const auto r = read_graph_dir(dir);
  EXPECT_EQ(r.src, g.src);
  EXPECT_EQ(r.dst, g.dst);
  std::filesystem::remove_all(dir);
}

// The path 0 - 1 - 2: with self loops the degrees are 2, 3, 2.
TEST(GcnAdjacency, NormalisesBySquareRootsOfDegrees) {
  GraphData g;
  g.nodes = 3;
  g.src = {1, 0, 2, 1};
  g.dst = {0, 1, 1, 2};
  const auto a = gcn_adjacency(g);
  EXPECT_EQ(a.rows, (std::vector<std::int64_t>{0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(a.cols, (std::vector<std::int64_t>{0, 1, 0, 1, 2, 1, 2}));
  const std::vector<double> want = {1.0 / 2, 1 / std::sqrt(6.0), 1 / std::sqrt(6.0), 1.0 / 3,
                                    1 / std::sqrt(6.0), 1 / std::sqrt(6.0), 1.0 / 2};
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(a.weights[k], want[k], 1e-7) << k;
}

}  // namespace
}  // namespace trident::gnn

namespace trident::gnn {
namespace {

// "@metis=K" renumbers the nodes part by part: the same graph (labels,
// masks, edges, homophily, as a permutation), and contiguous ranges whose
// halos are far smaller than in the random order; the same on every load.
TEST(Metis, OrderKeepsTheGraphAndShrinksHalos) {
  const std::string source = "csbm:nodes=400,classes=4,features=3,homophily=0.9,seed=2";
  const auto g = load_graph(source), r = load_graph(source + "@metis=4"), again = load_graph(source + "@metis=4");
  EXPECT_EQ(r.src, again.src);
  EXPECT_EQ(r.x, again.x);
  EXPECT_EQ(r.edges(), g.edges());
  EXPECT_DOUBLE_EQ(r.homophily(), g.homophily());
  EXPECT_EQ(GraphData::count(r.train), GraphData::count(g.train));
  auto sorted = [](std::vector<std::int64_t> v) { return std::sort(v.begin(), v.end()), v; };
  EXPECT_EQ(sorted(r.labels), sorted(g.labels));
  // Node i's features and label moved together.
  std::multiset<std::pair<std::int64_t, float>> a, b;
  for (std::int64_t i = 0; i < 400; ++i) a.insert({g.labels[i], g.x[i * 3]}), b.insert({r.labels[i], r.x[i * 3]});
  EXPECT_EQ(a, b);
  std::int64_t before = 0, after = 0;
  for (auto h : halo_sizes(gcn_adjacency(g), even_bounds(400, 4))) before += h;
  for (auto h : halo_sizes(gcn_adjacency(r), even_bounds(400, 4))) after += h;
  EXPECT_LT(after * 3, before) << before << " -> " << after;
  EXPECT_THROW(load_graph(source + "@metis=x"), GraphDataError);
  EXPECT_THROW(load_graph(source + "@metis=1"), GraphDataError);
}

}  // namespace
}  // namespace trident::gnn
