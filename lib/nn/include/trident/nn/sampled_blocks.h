// Note [Sampled blocks]
// ~~~~~~~~~~~~~~~~~~~~~
// A sampled GNN (model.fanouts, docs/gnn.md) trains on mini-batches of seed
// nodes: a sample is one seed node (dataset fields `node`, its id, and
// `label`), and a micro-batch's forward reads the blocks its seeds sampled
// (Note [Neighbour sampling] in gnn/sampling.h) from this thread's
// SampledBlocks, which the runtime opens around the forward (and the
// recomputed forward) of each micro-batch. Four ops read it:
//   block_features          block 0's source rows of the input features,
//                           [S_0, F] (from the feature store), each followed
//                           by its node's learnable embedding when the model
//                           has one (attr embedding; Note [Sparse Adagrad]
//                           in optim/sparse_adagrad.h);
//   block_aggregate (l)     A_l X: [S_l, d] -> [D_l, d], A_l the layer's
//                           sparse [D_l, S_l] weights, coalesced (entries
//                           by destination, then local source) — the full
//                           graph's graph_aggregate restricted to the block;
//   block_targets (l)       the first D_l rows of [S_l, d]: a block's
//                           destinations are its first sources;
//   dropout (block_layer l) a row's mask is drawn from (run seed, step, op,
//                           node id), so a node drops the same units in
//                           whichever batch, micro-batch or process it is.
// Between them tensors have a row per block node, not per seed; the last
// layer's destinations are the seeds, in the batch's order, so the logits
// are [seeds, C] and the loss is cross_entropy's. A node's output is a
// function of its own sampled tree alone, so splitting the seeds among
// processes changes nothing but the order of the gradient's sums.
//
// Weights (attr `norm` of block_aggregate, the same for every layer):
//   mean  1/k_v over v's k_v sampled in-neighbours (GraphSAGE-mean; a node
//         without any reads zeros);
//   gcn   GCN's D^-1/2 (A + I) D^-1/2 on the full graph's degrees d, each
//         sampled neighbour scaled by d_v / k_v (an unbiased estimate of
//         the full sum), and the self loop 1 / (d_v + 1);
//   edges none: block_attention computes its own (GAT).
// With every neighbour kept (fan-out -1) the weights are the full graph's,
// so a batch's logits on its seeds equal the full-graph model's.
//
// Note [Graph attention]
// ~~~~~~~~~~~~~~~~~~~~~~
// GAT's layer (Velickovic et al. 2018), multi-head: z = x W^T + b (a linear
// op before the attention op) split into H heads of width d'; for an edge
// u -> v, e = LeakyReLU_0.2(a_l.z_u + a_r.z_v); alpha = softmax of e over
// v's in-edges, v's self loop included; v's output is sum_u alpha z_u per
// head, the heads concatenated (or averaged, attr concat false). The
// attention weights sum to 1, so the projection's bias b is the layer's
// output bias. The full graph's op (graph_attention) takes
// its edges from the adjacency constant (GCN's, whose pattern is A + I);
// the block's (block_attention) from the block's sampled edges and a self
// loop per destination — with every neighbour kept, the same edges. No
// dropout on the attention weights.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trident/gnn/sampling.h"
#include "trident/nn/thread_scope.h"

namespace trident::nn {

struct SampledLayer {
  std::int64_t dst = 0, src = 0;  // how many destinations and sources
  torch::Tensor adjacency;        // sparse float32 [dst, src], coalesced (undefined under norm "edges")
  torch::Tensor edge_dst, edge_src;  // int64 [edges]: local ids, in the block's order
  torch::Tensor src_nodes;        // int64 [src]: global ids (dropout's keys)
};

struct SampledBlocks {
  std::vector<SampledLayer> layers;  // layers[l] is block l
  torch::Tensor features;            // float32 [layers[0].src, F]
  torch::Tensor embedding;           // [layers[0].src, D]: learnable rows (a leaf when training), or undefined
  std::uint64_t hash = 0;            // gnn::SampledBatch::hash() of the blocks
};

// Tensors of `batch` under weights `norm` (mean | gcn | edges); `degrees`
// are the full graph's in-degrees (gcn), `features` block 0's source rows.
// Throws std::invalid_argument for another norm.
std::shared_ptr<SampledBlocks> make_blocks(const gnn::SampledBatch& batch, const std::string& norm,
                                           const std::vector<std::int64_t>& degrees, torch::Tensor features);

// `b` with its tensors on `device` (itself on the CPU).
std::shared_ptr<const SampledBlocks> on_device(std::shared_ptr<const SampledBlocks> b, c10::Device device);

// Sets this thread's blocks until it closes (scopes nest).
using BlockScope = ThreadScope<SampledBlocks>;

// This thread's blocks, or null outside every scope.
inline const std::shared_ptr<const SampledBlocks>& sampled_blocks() { return BlockScope::current(); }

}  // namespace trident::nn
