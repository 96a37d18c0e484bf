// The functions of sampled GNNs' ops (internal to nn; GraphModule builds
// them): see Note [Sampled blocks] in nn/sampled_blocks.h.
//
// Note [Graph attention]
// ~~~~~~~~~~~~~~~~~~~~~~
// GAT's layer (Velickovic et al. 2018), multi-head: z = x W^T split into H
// heads of width d'; for an edge u -> v, e = LeakyReLU_0.2(a_l.z_u + a_r.z_v);
// alpha = softmax of e over v's in-edges, v's self loop included; v's output
// is sum_u alpha z_u per head, the heads concatenated (or averaged, attr
// concat false), plus a bias. The full graph's op (graph_attention) takes
// its edges from the adjacency constant (GCN's, whose pattern is A + I);
// the block's (block_attention) from the block's sampled edges and a self
// loop per destination — with every neighbour kept, the same edges. No
// dropout on the attention weights.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "trident/graph/op_graph.h"
#include "trident/nn/graph_module.h"

namespace trident::nn {

bool is_block_op(const std::string& kind);  // block_features, block_aggregate, block_targets

// A parameter-free block op's function; throws graph::GraphError for another kind.
OpFn block_op_of(const graph::Op& op);

// Dropout of a sampled GNN (attr block_layer >= 0) under a BlockScope and
// a RandomScope: x [S_l, d] times a mask keyed by each row's node id (Note
// [Sampled blocks]); nullopt when it does not apply (then dropout draws as
// usual).
std::optional<torch::Tensor> block_dropout(const std::string& name, std::int64_t layer, double p, const torch::Tensor& x);

struct AttentionWeights {
  torch::Tensor weight;          // [H d', in]
  torch::Tensor attn_l, attn_r;  // [H, d']
  torch::Tensor bias;            // [H d'] or [d'] when not concatenated
  bool concat = true;
};
torch::Tensor attend(const AttentionWeights& w, const torch::Tensor& x, std::int64_t dst, const torch::Tensor& edge_dst,
                     const torch::Tensor& edge_src);
// graph_attention (the full graph's, from `constants`) or block_attention.
OpFn attention_of(const graph::Op& op, AttentionWeights w, const std::map<std::string, torch::Tensor>& constants);

}  // namespace trident::nn
