// The ops of sampled GNNs (Note [Sampled blocks] in nn/sampled_blocks.h).
#include "block_ops.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "trident/base/hash.h"
#include "trident/base/keyed_random.h"
#include "trident/nn/random.h"
#include "trident/nn/sampled_blocks.h"

namespace trident::nn {
namespace {

torch::Tensor int64_tensor(const std::vector<std::int64_t>& v) {
  return torch::tensor(v, torch::kInt64);
}

// The layer's weights per sampled edge (see "Weights" in the Note).
std::vector<float> edge_weights(const gnn::Block& b, const std::string& norm, const std::vector<std::int64_t>& degrees) {
  if (norm == "mean") return b.mean_weights();
  std::vector<std::int64_t> sampled(b.dst.size(), 0);
  for (auto d : b.edge_dst) ++sampled[static_cast<std::size_t>(d)];
  std::vector<float> w;
  w.reserve(b.edge_dst.size());
  for (std::size_t e = 0; e < b.edge_dst.size(); ++e) {
    const auto i = static_cast<std::size_t>(b.edge_dst[e]), j = static_cast<std::size_t>(b.edge_src[e]);
    const double dv = static_cast<double>(degrees.at(static_cast<std::size_t>(b.dst[i])));
    const double du = static_cast<double>(degrees.at(static_cast<std::size_t>(b.src[j])));
    w.push_back(static_cast<float>(dv / static_cast<double>(sampled[i]) / std::sqrt((du + 1) * (dv + 1))));
  }
  return w;
}

SampledLayer layer_of(const gnn::Block& b, const std::string& norm, const std::vector<std::int64_t>& degrees) {
  SampledLayer l;
  l.dst = static_cast<std::int64_t>(b.dst.size()), l.src = static_cast<std::int64_t>(b.src.size());
  l.edge_dst = int64_tensor(b.edge_dst), l.edge_src = int64_tensor(b.edge_src);
  l.src_nodes = int64_tensor(b.src);
  if (norm == "edges") return l;
  auto rows = b.edge_dst, cols = b.edge_src;
  auto w = edge_weights(b, norm, degrees);
  if (norm == "gcn")  // the self loop: destination i is source i
    for (std::int64_t i = 0; i < l.dst; ++i) {
      rows.push_back(i), cols.push_back(i);
      w.push_back(static_cast<float>(1.0 / (static_cast<double>(degrees.at(static_cast<std::size_t>(b.dst[i]))) + 1)));
    }
  const auto index = torch::stack({int64_tensor(rows), int64_tensor(cols)});
  l.adjacency = torch::sparse_coo_tensor(index, torch::tensor(w, torch::kFloat32), {l.dst, l.src}).coalesce();
  return l;
}

const SampledBlocks& blocks_for(const graph::Op& op) {
  const auto& b = sampled_blocks();
  if (!b)
    throw Failure("op '" + op.name + "' (" + op.kind + ") reads a sampled batch's blocks, and none is open: a "
                  "sampled GNN runs only in trident's runtime (Note [Sampled blocks])");
  return *b;
}

const SampledLayer& layer_for(const graph::Op& op, std::int64_t l) {
  const auto& b = blocks_for(op);
  if (l < 0 || l >= static_cast<std::int64_t>(b.layers.size()))
    throw Failure("op '" + op.name + "' reads block " + std::to_string(l) + " of a batch sampled with " +
                  std::to_string(b.layers.size()) + " layers");
  return b.layers[static_cast<std::size_t>(l)];
}

void check_rows(const graph::Op& op, const torch::Tensor& x, std::int64_t rows) {
  if (x.dim() != 2 || x.size(0) != rows)
    throw Failure("op '" + op.name + "' (" + op.kind + ") got " + c10::str(x.sizes()) + "; its block has " +
                  std::to_string(rows) + " source rows");
}

// See Note [Sampled blocks]: keep[i, j] drawn from (seed, step, op, node i, j).
torch::Tensor node_keyed_mask(const torch::Tensor& nodes, std::int64_t width, double p, const RandomKey& key,
                              std::uint64_t op) {
  auto keep = torch::empty({nodes.size(0), width}, torch::kFloat32);
  const auto* id = nodes.data_ptr<std::int64_t>();
  auto* out = keep.data_ptr<float>();
  const auto scale = static_cast<float>(1 / (1 - p));
  at::parallel_for(0, nodes.size(0), 256, [&](std::int64_t begin, std::int64_t end) {
    for (auto i = begin; i < end; ++i) {
      KeyedRandom random({key.seed, static_cast<std::uint64_t>(key.step), op, static_cast<std::uint64_t>(id[i])});
      for (std::int64_t j = 0; j < width; ++j) out[i * width + j] = random.uniform(0, 1) < p ? 0.0f : scale;
    }
  });
  return keep;
}

}  // namespace

std::shared_ptr<SampledBlocks> make_blocks(const gnn::SampledBatch& batch, const std::string& norm,
                                           const std::vector<std::int64_t>& degrees, torch::Tensor features) {
  if (norm != "mean" && norm != "gcn" && norm != "edges")
    throw std::invalid_argument("block weights '" + norm + "': allowed mean, gcn, edges");
  auto out = std::make_shared<SampledBlocks>();
  for (const auto& b : batch.blocks) out->layers.push_back(layer_of(b, norm, degrees));
  out->features = std::move(features);
  out->hash = batch.hash();
  return out;
}

std::shared_ptr<const SampledBlocks> on_device(std::shared_ptr<const SampledBlocks> b, c10::Device device) {
  if (device.is_cpu()) return b;
  auto out = std::make_shared<SampledBlocks>(*b);
  for (auto& l : out->layers)
    for (auto* t : {&l.adjacency, &l.edge_dst, &l.edge_src})
      if (t->defined()) *t = t->to(device);
  out->features = out->features.to(device);
  if (out->embedding.defined()) out->embedding = out->embedding.to(device);  // gradients flow back to the host's leaf
  return out;
}

bool is_block_op(const std::string& kind) {
  return kind == "block_features" || kind == "block_aggregate" || kind == "block_targets" ||
         kind == "block_attention";
}

OpFn block_op_of(const graph::Op& op) {
  if (op.kind == "block_features")
    return [op, embedding = op.attrs.value("embedding", std::int64_t{0})](const std::vector<torch::Tensor>&) {
      const auto& b = blocks_for(op);
      if (!embedding) return b.features;
      if (!b.embedding.defined() || b.embedding.size(1) != embedding)
        throw Failure("op '" + op.name + "' (block_features) ends its rows with a " + std::to_string(embedding) +
                      "-wide node embedding; the batch's blocks carry none of that width");
      return torch::cat({b.features, b.embedding.to(b.features.scalar_type())}, 1);
    };
  const auto l = op.attrs.value("layer", std::int64_t{-1});
  if (op.kind == "block_targets")
    return [op, l](const std::vector<torch::Tensor>& in) {
      const auto& b = layer_for(op, l);
      check_rows(op, in[0], b.src);
      return in[0].narrow(0, 0, b.dst);
    };
  if (op.kind == "block_aggregate")
    return [op, l](const std::vector<torch::Tensor>& in) {
      RECORD_USER_SCOPE("trident::block_aggregate");
      const auto& b = layer_for(op, l);
      check_rows(op, in[0], b.src);
      if (!b.adjacency.defined()) throw Failure("op '" + op.name + "': the batch's blocks carry no weights");
      return torch::mm(b.adjacency, in[0]);
    };
  throw graph::GraphError("op '" + op.name + "' has kind '" + op.kind + "', not a block op");
}

// See Note [Graph attention] in nn/sampled_blocks.h.
torch::Tensor attend(const AttentionWeights& w, const torch::Tensor& projected, std::int64_t dst,
                     const torch::Tensor& edge_dst, const torch::Tensor& edge_src) {
  RECORD_USER_SCOPE("trident::graph_attention");
  const auto heads = w.attn_l.size(0), width = w.attn_l.size(1);
  const auto z = projected.reshape({projected.size(0), heads, width});
  const auto el = (z * w.attn_l).sum(-1), er = (z.narrow(0, 0, dst) * w.attn_r).sum(-1);
  const auto e = torch::leaky_relu(el.index_select(0, edge_src) + er.index_select(0, edge_dst), 0.2);
  torch::Tensor top;
  {
    torch::NoGradGuard no_grad;  // a constant shift per destination: the softmax is the same
    top = torch::full({dst, heads}, -std::numeric_limits<float>::infinity(), e.options())
              .scatter_reduce(0, edge_dst.unsqueeze(1).expand_as(e), e.detach(), "amax", /*include_self=*/true);
  }
  const auto a = torch::exp(e - top.index_select(0, edge_dst));
  const auto sum = torch::zeros({dst, heads}, a.options()).index_add(0, edge_dst, a);
  const auto alpha = a / sum.index_select(0, edge_dst);
  auto out = torch::zeros({dst, heads, width}, z.options()).index_add(0, edge_dst, alpha.unsqueeze(-1) * z.index_select(0, edge_src));
  return w.concat ? out.reshape({dst, heads * width}) : out.mean(1);
}

OpFn attention_of(const graph::Op& op, AttentionWeights w, const std::map<std::string, torch::Tensor>& constants) {
  if (op.kind == "block_attention")
    return [op, w, l = op.attrs.value("layer", std::int64_t{-1})](const std::vector<torch::Tensor>& in) {
      const auto& b = layer_for(op, l);
      check_rows(op, in[0], b.src);
      // Every destination attends to itself too (GAT's self loop): destination i is source i.
      const auto self = torch::arange(b.dst, torch::kInt64).to(b.edge_dst.device());
      return attend(w, in[0], b.dst, torch::cat({b.edge_dst, self}), torch::cat({b.edge_src, self}));
    };
  // The full graph's: the adjacency constant's entries (GCN's, self loops included) are the edges.
  const auto name = op.attrs.value("adjacency", std::string());
  const auto index = constants.find(name + ".index");
  if (index == constants.end())
    throw graph::GraphError("op '" + op.name + "' (graph_attention) reads graph constant '" + name + ".index', which the graph lacks");
  const auto rows = index->second[0].contiguous(), cols = index->second[1].contiguous();
  return [w, rows, cols](const std::vector<torch::Tensor>& in) {
    std::vector<torch::Tensor> out;
    for (std::int64_t s = 0; s < in[0].size(0); ++s)
      out.push_back(attend(w, in[0][s], in[0].size(1), rows.to(in[0].device()), cols.to(in[0].device())));
    return torch::stack(out);
  };
}

std::optional<torch::Tensor> block_dropout(const std::string& name, std::int64_t layer, double p,
                                           const torch::Tensor& x) {
  const auto& b = sampled_blocks();
  const auto key = random_key();
  if (layer < 0 || !b || !key) return std::nullopt;
  if (layer >= static_cast<std::int64_t>(b->layers.size()))
    throw Failure("op '" + name + "' (dropout) keys its rows by block " + std::to_string(layer) + "'s nodes; the batch has " +
                  std::to_string(b->layers.size()) + " blocks");
  const auto& nodes = b->layers[static_cast<std::size_t>(layer)].src_nodes;
  if (x.dim() != 2 || x.size(0) != nodes.size(0))
    throw Failure("op '" + name + "' (dropout) got " + c10::str(x.sizes()) + "; block " + std::to_string(layer) +
                  " has " + std::to_string(nodes.size(0)) + " source rows");
  if (p == 0) return x;
  const auto op = fnv1a(name.data(), name.size());
  return x * node_keyed_mask(nodes, x.size(1), p, *key, op).to(x.device(), x.scalar_type());
}

}  // namespace trident::nn
