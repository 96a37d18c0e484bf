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
//   self_attention {hidden, heads, causal}  [S,H] -> [S,H]; in_proj [3H,H], out_proj [H,H];
//                                    causal: position s attends to positions <= s only
//   embedding {rows, dim, std}       int64 [..., T] -> [..., T, dim]; weight [rows, dim] ~ N(0, std)
//   positional {std}                 [T, d] -> [T, d] + P; P [T, d] ~ N(0, std), a learned position embedding
//   unembed {table}                  [..., d] -> [..., rows]: x Eᵀ, E the [rows, d] parameter `table`
//                                    of an earlier op (an embedding: a head tied to it)
//   mean_seq                         [S,H] -> [H]
//   embedding_bag {rows, dim}        int64 [bag] -> [dim], mean of rows
//   cross_entropy {ignore_index}     (logits [C], label int64 []) -> loss sum; or per position,
//                                    ([..., T, C], int64 [..., T]) (Note [Token losses])
//   dropout {p}                      masks drawn per (seed, step, micro-batch, op): the same in every plan
// Graph ops (Note [Graph ops]): one sample is a whole graph of N nodes.
//   graph_aggregate {adjacency, nodes, nnz}   [N, d] -> [N, d]: A.X for the
//                                    sparse graph constant A named `adjacency`;
//                                    with {chunks: K} [C, d] -> [C, d], one
//                                    chunk's rows (Note [Node chunks])
//   mix {alpha}                      (a, b) -> (1 - alpha) a + alpha b
//   identity_map {dim, beta}         [..., d] -> (1 - beta) x + beta x W^T; weight [d, d]
//   masked_cross_entropy             (logits [N, C], label int64 [N], mask [N])
//                                    -> sum(mask * CE) / sum(mask)
//   graph_attention {adjacency, heads, width, concat}  [N, H w] -> [N, H w] (or [N, w]):
//                                    GAT's attention over the adjacency's pattern on projected
//                                    rows (Note [Graph attention] in nn/sampled_blocks.h); attn_l, attn_r [H, w]
// Sampled GNN ops (Note [Sampled blocks] in nn/sampled_blocks.h): a sample is
// a seed node, and a tensor's per-sample shape [r, d] counts r, the rows a
// seed adds to its block on average (no rows axis when r is 1: the seeds).
//   block_features {graph, fanouts, replace, embedding}  (node int64 []) -> [r_0, F + E]: block 0's
//                                    input rows, each followed by its node's learnable embedding (E wide)
//   block_aggregate {layer, norm}    [r_l, d] -> [r_l+1, d]: A_l X
//   block_targets {layer}            [r_l, d] -> [r_l+1, d]: the destinations' rows
//   block_attention {layer, heads, width, concat}  [r_l, H w] -> [r_l+1, H w]: GAT on block l
//   dropout {p, block_layer}         masks keyed by node id (rows of block `block_layer`)
//
// Note [Graph ops]
// ~~~~~~~~~~~~~~~~
// A full-graph GNN trains on one sample, the graph: node features [N, F],
// labels [N] and a mask [N] are its dataset fields, and every layer keeps
// the node axis, so a stage boundary between layers is an exact layer split
// (the whole graph's activations cross it). The adjacency is not data but a
// graph constant (OpGraph::constants(): "NAME.index" int64 [2, nnz] of
// (row, col) sorted by row then column, "NAME.weight" float32 [nnz]), held
// by the model on every rank whose stage aggregates, so it never crosses a
// link. The executor multiplies by it as a coalesced sparse COO matrix: one
// formulation in every plan, so one process and a layer split agree
// bitwise. A plan never splits a graph's nodes among micro-batches or
// replicas (a sample cannot be split): validation refuses it.
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
  OpId self_attention(const std::string& name, OpId x, std::int64_t heads, bool causal = false);
  OpId embedding(const std::string& name, OpId ids, std::int64_t rows, std::int64_t dim, double std = 1.0);
  OpId positional(const std::string& name, OpId x, double std);
  OpId unembed(const std::string& name, OpId x, const std::string& table);
  OpId mean_seq(const std::string& name, OpId x);
  OpId embedding_bag(const std::string& name, OpId ids, std::int64_t rows, std::int64_t dim);
  OpId cross_entropy(const std::string& name, OpId logits, OpId label);
  // block_layer >= 0: x's rows are block block_layer's sources (Note [Sampled blocks]).
  OpId dropout(const std::string& name, OpId x, double p, std::int64_t block_layer = -1);
  // Graph ops (Note [Graph ops]).
  // `nodes`, `chunks`: a chunked graph's (Note [Node chunks] in
  // nn/node_chunks.h): x holds one chunk's rows of a graph of `nodes` nodes.
  OpId graph_aggregate(const std::string& name, OpId x, const std::string& adjacency, std::int64_t nnz,
                       std::int64_t nodes = 0, int chunks = 0);
  OpId mix(const std::string& name, OpId a, OpId b, double alpha);
  OpId identity_map(const std::string& name, OpId x, double beta);
  OpId masked_cross_entropy(const std::string& name, OpId logits, OpId label, OpId mask);
  // GAT's attention (Note [Graph attention]) on projected rows z (a linear
  // of width heads x width before it): over the adjacency constant's
  // pattern (`layer` < 0, nnz its entries) or over block `layer` (`rows`
  // the destinations per seed, nnz its edges per seed, self loops included).
  struct Attention {
    std::int64_t heads = 1, width = 8;
    bool concat = true;
  };
  OpId attention(const std::string& name, OpId z, Attention a, std::int64_t layer, double rows, double nnz,
                 const std::string& adjacency = "adjacency");
  // Sampled GNN ops: `rows` per seed as in the table above, `edges` per seed.
  // `graph`, `fanouts`, `replace`: how the blocks are sampled, kept as attrs
  // for the planner and report; `embedding` > 0: each row ends with the
  // node's learnable embedding of that width.
  OpId block_features(const std::string& name, OpId node, double rows, std::int64_t features, const std::string& graph,
                      const std::vector<int>& fanouts, bool replace, std::int64_t embedding = 0);
  OpId block_aggregate(const std::string& name, OpId x, std::int64_t layer, const std::string& norm, double rows,
                       double edges);
  OpId block_targets(const std::string& name, OpId x, std::int64_t layer, double rows);
  // A graph constant: `dtype` "float32" or "int64", the raw bytes of `shape`.
  void constant(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape,
                const std::string& bytes);

  const TensorSpec& spec(OpId id) const { return g_.op(id).output; }
  // Validates and hands over the graph.
  OpGraph finish();

 private:
  OpId push(graph::Op op);
  graph::OpInput in(OpId id) const { return {id, spec(id)}; }
  OpGraph g_;
  nlohmann::json constants_;
};

}  // namespace trident::zoo
