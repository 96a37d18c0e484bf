// See commands.h: the model options every command that builds a model shares.
#include "commands.h"

#include "trident/base/error.h"
#include "trident/base/text.h"

namespace trident::cli {

void add_model_options(CLI::App* command, zoo::ModelSpec& model) {
  auto* name = command->add_option("--model", model.name, join(zoo::model_names(), " | "));
  command->add_option("--preset", model.preset, join(zoo::preset_names(), " | "));
  command->add_option("--model-file", model.file, "a user's model.json (tools/export) instead of --model")
      ->excludes(name);
  command->add_option("--graph", model.graph,
                      "graph neural networks: the graph, a directory of .npy files or csbm[:key=value,...] (docs/gnn.md)");
  command->add_option("--graph-chunks", model.graph_chunks,
                      "graph neural networks: GNNPipe mode, the nodes in this many chunks (docs/gnn.md; 0: exact)");
  command->add_option("--fanouts", model.fanouts,
                      "graph neural networks: sampled mini-batches, a fan-out per layer, input layer first (15,10,5; -1: "
                      "every neighbour; docs/gnn.md)")
      ->delimiter(',');
  command->add_flag("--sample-replace", model.sample_replace, "with --fanouts: sample neighbours with replacement");
  command->add_option("--hidden", model.hidden, "graph neural networks: the hidden width (0: the preset's)");
  command->add_option("--node-embedding", model.node_embedding,
                      "with --fanouts: a learnable embedding of this width per node (0: none)");
}

graph::OpGraph model_graph(zoo::ModelSpec& model) {
  if (model.name.empty() && model.file.empty())
    throw InputError("--model NAME (" + join(zoo::model_names(), ", ") + ") or --model-file FILE is required");
  auto g = zoo::build_graph(model);
  if (!model.file.empty()) model.name = g.name();
  return g;
}

}  // namespace trident::cli
