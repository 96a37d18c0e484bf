// The function of an op of kind "aten": a short program of ATen operator
// calls, made by tools/export (see Note [ATen capture] in trident_aten.py) and
// run through LibTorch's dispatcher by operator name and overload, so
// autograd, optimizers and checkpoints treat it like any other op.
// The program's format, parsed and checked torch-free where a graph enters:
// See Note [ATen programs] in graph/aten_program.h.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <torch/torch.h>

#include "trident/graph/aten_program.h"
#include "trident/graph/op_graph.h"
#include "trident/graph/precision.h"
#include "trident/nn/graph_module.h"

namespace trident::nn {

// OpGraph::constants() as tensors, each decoded and checked by
// graph::decode_constant (graph/constants.h; throws graph::GraphError naming it).
std::map<std::string, torch::Tensor> decode_constants(const graph::OpGraph& graph);

// A generator on `device` seeded with `seed` (see Note [Random ops] in random.h).
at::Generator seeded_generator(c10::Device device, std::uint64_t seed);

// Checks that every "aten" op of `graph` names operators this LibTorch has,
// and that the capture's format is one this build reads; throws
// graph::GraphError (exit 2) naming the operator, the PyTorch that captured
// the graph and this build's LibTorch, and what to do.
void check_aten_ops(const graph::OpGraph& graph);

// The function of `op` of `graph`; `param` returns the parameter tensor of a
// name. Throws graph::GraphError for a malformed program (parse_aten_program)
// or one this LibTorch cannot run (an unknown operator, an argument its
// schema does not take, a list kind it cannot build, a random call whose
// operator takes no generator).
OpFn aten_function(const graph::OpGraph& graph, const graph::Op& op,
                   const std::function<torch::Tensor(const std::string&)>& param,
                   const std::map<std::string, torch::Tensor>& constants,
                   const graph::Precision* precision = nullptr);

}  // namespace trident::nn
