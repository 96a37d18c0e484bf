// The functions of sampled GNNs' ops (internal to nn; GraphModule builds
// them): see Note [Sampled blocks] and Note [Graph attention] in
// nn/sampled_blocks.h.

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
  torch::Tensor attn_l, attn_r;  // [H, d']
  bool concat = true;
};
// z: [S, H d'] projected rows of the sources (the first dst are the destinations').
torch::Tensor attend(const AttentionWeights& w, const torch::Tensor& z, std::int64_t dst, const torch::Tensor& edge_dst,
                     const torch::Tensor& edge_src);
// graph_attention (the full graph's, from `constants`) or block_attention.
OpFn attention_of(const graph::Op& op, AttentionWeights w, const std::map<std::string, torch::Tensor>& constants);

}  // namespace trident::nn
