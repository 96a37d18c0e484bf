// The function of an op of kind "aten": a short program of ATen operator
// calls, made by tools/export (Note [ATen capture] in trident_aten.py) and
// run through LibTorch's dispatcher by operator name and overload, so
// autograd, optimizers and checkpoints treat it like any other op.
//
// Note [ATen programs]: attrs "calls" is a list of {"op", "overload", "args",
// "kwargs"}; "result" names the op's output. An argument is a JSON constant
// (number, bool, string, null, {"float": "inf"}, {"dtype": ...},
// {"layout": ...}, {"memory_format": ...}), a list, or a reference:
//   {"in": i}              the op's i-th input (batch on axis 0)
//   {"call": j[, "item": k]}  call j's result (its k-th, for a tuple or list)
//   {"param": name}        a parameter of the model
//   {"const": name}        a graph constant (OpGraph::constants)
//   {"batch": a, "plus": c}  the integer a·B + c, B the rows of input 0
//   {"device": ...}        the device of input 0
// Arguments are converted by the operator's schema, so an integer passed
// where the schema takes a float becomes one, as in Python.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <torch/torch.h>

#include "trident/graph/op_graph.h"
#include "trident/nn/graph_module.h"

namespace trident::nn {

// Decodes OpGraph::constants() into tensors; throws graph::GraphError naming
// a constant that is not {"dtype", "shape", "base64"} of matching size.
std::map<std::string, torch::Tensor> decode_constants(const graph::OpGraph& graph);

// A generator on `device` seeded with `seed` (Note [Random ops] in random.h).
at::Generator seeded_generator(c10::Device device, std::uint64_t seed);

// Checks that every "aten" op of `graph` names operators this LibTorch has,
// and that the capture's format is one this build reads; throws
// graph::GraphError (exit 2) naming the operator, the PyTorch that captured
// the graph and this build's LibTorch, and what to do.
void check_aten_ops(const graph::OpGraph& graph);

// The op's function; `param` returns the parameter tensor of a name.
// Throws graph::GraphError for a malformed program.
OpFn aten_function(const graph::Op& op, const std::function<torch::Tensor(const std::string&)>& param,
                   const std::map<std::string, torch::Tensor>& constants);

}  // namespace trident::nn
