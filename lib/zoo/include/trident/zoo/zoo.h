// The model zoo: each model is a function of (name, preset) that builds its
// OpGraph. The torch modules come from the graph (nn::GraphModule), so one
// spec yields both. Presets: `tiny` trains on a CPU in seconds; `paper` has
// the sizes of the GraphPipe evaluation (docs/algorithms.md §2) and is for planning.
#pragma once

#include <string>
#include <vector>

#include "trident/graph/op_graph.h"

namespace trident::zoo {

struct ModelSpec {
  std::string name;             // see model_names()
  std::string preset = "tiny";  // tiny | paper
};

const std::vector<std::string>& model_names();
const std::vector<std::string>& preset_names();

// The dataset a model trains on by default: "fashion-mnist" or "synthetic".
std::string default_dataset(const std::string& model_name);

// Throws graph::GraphError naming the model or preset and the allowed
// values when unknown.
graph::OpGraph build_graph(const ModelSpec& spec);

}  // namespace trident::zoo
