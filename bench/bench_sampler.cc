// Neighbour sampling's throughput (bench/run_sampler.sh): an R-MAT graph
// (gnn/rmat.h) generated once, then GraphSAGE-style batches of seed nodes
// sampled into blocks (gnn/sampling.h) on `threads` threads. Prints one
// JSON line: the graph's nodes and edges, the seconds to generate it, and
// sampled edges per second over `batches` batches (seeds (b * batch + i) *
// 7919 mod N, which bench/dgl_sampled.py samples too). With OUT_DIR the graph,
// its features included, is written there first as a graph directory
// (Note [Graphs as data]) for DGL and for `trident train` to read.
#include <chrono>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "trident/gnn/rmat.h"
#include "trident/gnn/sampling.h"

using namespace trident;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: bench_sampler GRAPH_SOURCE FANOUTS(15,10,5) BATCH BATCHES THREADS [OUT_DIR]\n";
    return 2;
  }
  const std::string source = argv[1];
  gnn::SampleOptions o;
  std::stringstream list(argv[2]);
  for (std::string f; std::getline(list, f, ',');) o.fanouts.push_back(std::stoi(f));
  const int batch = std::stoi(argv[3]), batches = std::stoi(argv[4]);
  o.threads = std::stoi(argv[5]);
  const auto t0 = std::chrono::steady_clock::now();
  const bool write = argc > 6;
  const auto g = gnn::load_graph(source, write);
  const auto csr = gnn::in_neighbours(g);
  const auto t1 = std::chrono::steady_clock::now();
  if (write) gnn::write_graph_dir(g, argv[6]);
  const auto t1b = std::chrono::steady_clock::now();
  std::int64_t edges = 0, inputs = 0;
  for (int b = 0; b < batches; ++b) {
    std::vector<std::int64_t> seeds;
    for (int i = 0; i < batch; ++i) seeds.push_back((static_cast<std::int64_t>(b) * batch + i) * 7919 % g.nodes);
    o.epoch = b;
    const auto s = gnn::sample_blocks(csr, seeds, o);
    for (const auto& blk : s.blocks) edges += static_cast<std::int64_t>(blk.edge_dst.size());
    inputs += static_cast<std::int64_t>(s.input_nodes().size());
  }
  const auto t2 = std::chrono::steady_clock::now();
  const auto sec = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::cout << nlohmann::json{{"nodes", g.nodes},
                              {"edges", g.edges()},
                              {"generate_s", sec(t0, t1)},
                              {"threads", o.threads},
                              {"batch", batch},
                              {"edges_per_batch", edges / batches},
                              {"input_nodes_per_batch", inputs / batches},
                              {"sampled_edges_per_s", edges / sec(t1b, t2)},
                              {"batches_per_s", batches / sec(t1b, t2)}}
                   .dump()
            << std::endl;
  return 0;
}
