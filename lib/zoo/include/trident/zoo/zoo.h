// The model zoo: each model is a function of (name, preset) that builds its
// OpGraph. The torch modules come from the graph (nn::GraphModule), so one
// spec yields both. Presets: `tiny` trains on a CPU in seconds; `paper` has
// the sizes of the GraphPipe evaluation (docs/algorithms.md §2) and is for
// planning; gpt has GPT-2's sizes too (gpt2-124m, gpt2-350m, gpt2-1.5b).
#pragma once

#include <string>
#include <vector>

#include "trident/graph/op_graph.h"

namespace trident::zoo {

struct ModelSpec {
  std::string name;             // see model_names()
  std::string preset = "tiny";  // tiny | paper, and gpt's own (presets_of)
  // A user's model instead of a zoo one (docs/own-model.md): the graph file
  // `tools/export` wrote ("trident-graph/1"), and optionally the initial
  // weights beside it (a PyTorch state_dict file). `name` is then the
  // graph's own name.
  std::string file, weights;
  // Graph neural networks (gcn2, sage2, gcniiN, jk_gcnN, appnp, graph_mlp): the
  // graph they train on, a directory or csbm[:key=value,...] (Note [Graphs
  // as data] in gnn/graph_data.h); empty: "csbm". Their sizes (nodes,
  // features, classes) and adjacency come from it.
  std::string graph;
  // GNNPipe mode (Note [Node chunks] in nn/node_chunks.h): 2 or more — the
  // graph's nodes train as this many chunks (contiguous, even ranges), one
  // sample each, padded to the largest; 0: the whole graph is one sample.
  std::int64_t graph_chunks = 0;
  // Sampled mini-batch training (Note [Sampled blocks] in nn/sampled_blocks.h):
  // a fan-out per layer, the input layer first, -1 for every neighbour
  // (model.fanouts); empty: full-graph training. `sample_replace` samples
  // with replacement.
  std::vector<int> fanouts;
  bool sample_replace = false;
  // A GNN's hidden width; 0: the preset's (model.hidden).
  std::int64_t hidden = 0;
  // Sampled training: a learnable embedding of this width per node, beside
  // the features (model.node_embedding; Note [Sparse Adagrad]); 0: none.
  std::int64_t node_embedding = 0;
};

const std::vector<std::string>& model_names();
// Every preset some model has; presets_of(name), the ones model `name` has:
// tiny and paper for every model, and for gpt also gpt2-124m, gpt2-350m and
// gpt2-1.5b (paper: gpt2-1.5b).
const std::vector<std::string>& preset_names();
std::vector<std::string> presets_of(const std::string& model_name);

// Whether `name` is one of the zoo's graph neural networks.
bool is_gnn_model(const std::string& name);
// How many layers (fan-outs) a GNN that trains on sampled blocks has
// (gcn2, gat2: 2; sageN: N); 0 for every other model.
int sampled_layers(const std::string& name);

// The dataset a model trains on by default: "fashion-mnist", "synthetic" or
// "graph" (a GNN's, from ModelSpec::graph).
std::string default_dataset(const std::string& model_name);

// Throws graph::GraphError naming the model or preset and the allowed
// values when unknown; for a model file, naming the file and what is wrong
// in it.
graph::OpGraph build_graph(const ModelSpec& spec);

// The graph of a model file (ModelSpec::file). Throws graph::GraphError.
graph::OpGraph read_model_file(const std::string& path);

}  // namespace trident::zoo
