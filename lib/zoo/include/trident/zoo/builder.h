// GraphBuilder: appends ops of the kinds that trident's executor implements,
// deriving each op's output shape, parameters, FLOPs and activation bytes from
// its inputs and settings. The zoo's models are written with it; so can a
// user's own model. Torch-free: a paper-size graph costs no weight memory.
//
// The op kinds and their attrs (all sizes per sample):
//   input {field, dtype[, range]}    a dataset field; range bounds int64 ids
//   linear {in, out}                 [..., in] -> [..., out]; weight [out,in], bias [out]
//   conv2d {in, out, kernel, stride, padding}   [C,H,W] -> [O,H',W']
//   max_pool2d {kernel, stride, padding}
//   global_avg_pool                  [C,H,W] -> [C]
//   relu, gelu, tanh                 elementwise
//   flatten                          [...] -> [n]
//   reshape {shape}
//   concat {axis}                    along a per-sample axis
//   add                              elementwise sum of two inputs
//   layer_norm {dim}                 over the last axis; weight, bias [dim]
//   self_attention {hidden, heads}   [S,H] -> [S,H]; in_proj [3H,H], out_proj [H,H]
//   mean_seq                         [S,H] -> [H]
//   embedding_bag {rows, dim}        int64 [bag] -> [dim], mean of rows
//   cross_entropy                    (logits [C], label int64 []) -> loss sum
#pragma once

#include <string>
#include <vector>

#include "trident/graph/op_graph.h"

namespace trident::zoo {

using graph::OpGraph;
using graph::OpId;
using graph::TensorSpec;

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string model_name) : g_(std::move(model_name)) {}

  OpId input(const std::string& field, TensorSpec spec, std::int64_t range = 0);
  OpId linear(const std::string& name, OpId x, std::int64_t out);
  OpId conv2d(const std::string& name, OpId x, std::int64_t out, std::int64_t kernel,
              std::int64_t stride = 1, std::int64_t padding = 0);
  OpId max_pool2d(const std::string& name, OpId x, std::int64_t kernel, std::int64_t stride,
                  std::int64_t padding = 0);
  OpId global_avg_pool(const std::string& name, OpId x);
  OpId activation(const std::string& name, const std::string& kind, OpId x);  // relu, gelu, tanh
  OpId flatten(const std::string& name, OpId x);
  OpId reshape(const std::string& name, OpId x, std::vector<std::int64_t> shape);
  OpId concat(const std::string& name, const std::vector<OpId>& xs, std::int64_t axis);
  OpId add(const std::string& name, OpId a, OpId b);
  OpId layer_norm(const std::string& name, OpId x);
  OpId self_attention(const std::string& name, OpId x, std::int64_t heads);
  OpId mean_seq(const std::string& name, OpId x);
  OpId embedding_bag(const std::string& name, OpId ids, std::int64_t rows, std::int64_t dim);
  OpId cross_entropy(const std::string& name, OpId logits, OpId label);

  const TensorSpec& spec(OpId id) const { return g_.op(id).output; }
  // Validates and hands over the graph.
  OpGraph finish();

 private:
  OpId push(graph::Op op);
  graph::OpInput in(OpId id) const { return {id, spec(id)}; }
  OpGraph g_;
};

}  // namespace trident::zoo
