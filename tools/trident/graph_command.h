// `trident graph`: a model's operator graph, in one summary line, one line
// per op (--ops) or one line per submodule (--by-module DEPTH, the coarse
// view of a captured model whose ops are ATen calls).
#pragma once

#include <string>

#include "trident/zoo/zoo.h"

namespace trident::cli {

// Prints the summary (and the views asked for); writes the graph JSON to
// `out` when given. Throws graph::GraphError for a bad model.
int show_graph(zoo::ModelSpec model, const std::string& out, bool all_ops, int by_module);

}  // namespace trident::cli
