// A graph's outside input (docs/gnn.md, Note [Graphs as data]): a
// generator source ("csbm:key=value,...", "...@metis=K"), or a graph
// directory's edges.npy — the file whose every value indexes the nodes —
// beside small valid features, labels and masks.
#include <filesystem>

#include "fuzz.h"
#include "trident/base/files.h"
#include "trident/gnn/graph_data.h"

namespace {

// A 4-node graph directory whose edges.npy each input replaces.
std::string graph_dir() {
  static const std::string dir = [] {
    const auto d = std::filesystem::temp_directory_path() / ("trident-fuzz-graph-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    trident::gnn::GraphData g;
    g.name = "fuzz", g.nodes = 4, g.features = 2, g.classes = 2;
    g.x.assign(8, 1.0f), g.labels = {0, 1, 0, 1};
    g.train = {1, 1, 0, 0}, g.val = {0, 0, 1, 0}, g.test = {0, 0, 0, 1};
    trident::gnn::write_graph_dir(g, d.string());
    return d.string();
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = trident::fuzz::text_of(data, size);
  if (text.rfind("csbm", 0) == 0) {
    // Parsed and checked only: a valid source may ask for a large graph.
    trident::fuzz::expect_clear_error([&] {
      const auto at = text.rfind("@metis=");
      trident::gnn::parse_csbm(text.substr(0, at));
    });
    return 0;
  }
  const auto dir = graph_dir();
  trident::write_file_atomic(dir + "/edges.npy", text);
  trident::fuzz::expect_clear_error([&] { trident::gnn::read_graph_dir(dir); });
  return 0;
}
