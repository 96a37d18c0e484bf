#include "trident/nn/graph_module.h"

#include <cmath>
#include <limits>
#include <map>

#include "aten_op.h"
#include "block_ops.h"
#include "gnn_ops.h"
#include "precision_casts.h"
#include "trident/base/json.h"
#include "trident/base/files.h"
#include "trident/base/hash.h"
#include "trident/nn/node_chunks.h"
#include "trident/nn/node_parts.h"
#include "trident/nn/random.h"
#include "trident/nn/small_matmul.h"

namespace trident::nn {

using graph::GraphError;
using graph::Op;

namespace {

std::int64_t attr(const Op& op, const char* key) {
  if (!op.attrs.contains(key)) throw GraphError("op '" + op.name + "' (" + op.kind + ") needs attr '" + key + "'");
  if (!op.attrs.at(key).is_number_integer())
    throw GraphError("op '" + op.name + "' (" + op.kind + "): attr '" + key + "' must be an integer, got " +
                     op.attrs.at(key).dump());
  return get_checked<std::int64_t>(op.attrs.at(key));
}

// A 2-d window setting: one integer for both axes, or [height, width].
torch::ExpandingArray<2> pair(const Op& op, const char* key) {
  const auto& v = op.attrs.contains(key) ? op.attrs.at(key) : nlohmann::json();
  if (v.is_number_integer()) return torch::ExpandingArray<2>(get_checked<std::int64_t>(v));
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer())
    return torch::ExpandingArray<2>({get_checked<std::int64_t>(v[0]), get_checked<std::int64_t>(v[1])});
  throw GraphError("op '" + op.name + "' (" + op.kind + "): attr '" + key +
                   "' must be an integer or [height, width], got " + (v.is_null() ? "nothing" : v.dump()));
}

bool has_bias(const Op& op) { return op.attrs.value("bias", true); }

// Multi-head self-attention with packed q/k/v projection, written out so its
// parameter names are plain (`in_proj`, `out_proj`).
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(std::int64_t hidden, std::int64_t heads, bool causal)
      : heads_(heads),
        causal_(causal),
        in_proj_(register_module("in_proj", torch::nn::Linear(hidden, 3 * hidden))),
        out_proj_(register_module("out_proj", torch::nn::Linear(hidden, hidden))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const auto b = x.size(0), s = x.size(1), h = x.size(2), dh = h / heads_;
    auto qkv = in_proj_->forward(x).view({b, s, 3, heads_, dh}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];  // [b, heads, s, dh]
    torch::Tensor y;
    if (causal_) {
      // A position sees itself and the ones before it: LibTorch's fused
      // attention (flash on CPU), as PyTorch users call it; it never holds
      // the s x s scores (gpt2-124m: 48 MB per layer, each faulted in
      // afresh every step) and accumulates its softmax in fp32 under bf16.
      y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    } else {
      auto scores = nn::batched_matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(dh));
      auto att = torch::softmax(scores, -1, torch::kFloat32);  // fp32 under bf16 too (Note [Precision policy])
      y = nn::batched_matmul(att, v);
    }
    return out_proj_->forward(y.transpose(1, 2).reshape({b, s, h}));
  }

 private:
  std::int64_t heads_;
  bool causal_;
  torch::nn::Linear in_proj_, out_proj_;
};

class BatchNormImpl : public torch::nn::Module {
 public:
  BatchNormImpl(std::int64_t features, double eps)
      : eps_(eps),
        weight_(register_parameter("weight", torch::ones({features}))),
        bias_(register_parameter("bias", torch::zeros({features}))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    return torch::batch_norm(x, weight_, bias_, {}, {}, /*training=*/true, /*momentum=*/0.0, eps_,
                             /*cudnn_enabled=*/false);
  }

 private:
  double eps_;
  torch::Tensor weight_, bias_;
};

// torch.nn.MultiheadAttention as self-attention (query = key = value,
// batch first), with its parameter names: in_proj_weight, in_proj_bias,
// out_proj.weight, out_proj.bias.
class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  MultiheadAttentionImpl(std::int64_t hidden, std::int64_t heads)
      : heads_(heads),
        in_w_(register_parameter("in_proj_weight", torch::empty({3 * hidden, hidden}))),
        in_b_(register_parameter("in_proj_bias", torch::zeros({3 * hidden}))),
        out_proj_(register_module("out_proj", torch::nn::Linear(hidden, hidden))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const auto b = x.size(0), s = x.size(1), h = x.size(2), dh = h / heads_;
    auto qkv = torch::linear(x, in_w_, in_b_).view({b, s, 3, heads_, dh}).permute({2, 0, 3, 1, 4});
    auto q = qkv[0], k = qkv[1], v = qkv[2];
    auto att = torch::softmax(nn::batched_matmul(q / std::sqrt(static_cast<double>(dh)), k.transpose(-2, -1)), -1,
                              torch::kFloat32);  // fp32 under bf16 too (Note [Precision policy])
    return out_proj_->forward(nn::batched_matmul(att, v).transpose(1, 2).reshape({b, s, h}));
  }

 private:
  std::int64_t heads_;
  torch::Tensor in_w_, in_b_;
  torch::nn::Linear out_proj_;
};

using Inputs = std::vector<torch::Tensor>;

// The module of an op that holds parameters, to be placed in the module tree
// under the op's name; nullptr for a parameter-free op.
std::shared_ptr<torch::nn::AnyModule> make_layer(const Op& op) {
  const std::string& k = op.kind;
  auto any = [](auto module) { return std::make_shared<torch::nn::AnyModule>(module); };
  if (k == "linear")
    return any(torch::nn::Linear(torch::nn::LinearOptions(attr(op, "in"), attr(op, "out")).bias(has_bias(op))));
  if (k == "conv2d")
    return any(torch::nn::Conv2d(torch::nn::Conv2dOptions(attr(op, "in"), attr(op, "out"), pair(op, "kernel"))
                                     .stride(pair(op, "stride"))
                                     .padding(pair(op, "padding"))
                                     .bias(has_bias(op))));
  if (k == "conv1d")
    return any(torch::nn::Conv1d(torch::nn::Conv1dOptions(attr(op, "in"), attr(op, "out"), attr(op, "kernel"))
                                     .stride(attr(op, "stride"))
                                     .padding(attr(op, "padding"))
                                     .bias(has_bias(op))));
  if (k == "layer_norm")
    return any(torch::nn::LayerNorm(torch::nn::LayerNormOptions({attr(op, "dim")}).eps(op.attrs.value("eps", 1e-5))));
  if (k == "batch_norm") return any(std::make_shared<BatchNormImpl>(attr(op, "features"), op.attrs.value("eps", 1e-5)));
  if (k == "self_attention")
    return any(std::make_shared<SelfAttentionImpl>(attr(op, "hidden"), attr(op, "heads"), op.attrs.value("causal", false)));
  if (k == "multihead_attention")
    return any(std::make_shared<MultiheadAttentionImpl>(attr(op, "hidden"), attr(op, "heads")));
  if (k == "embedding") return any(torch::nn::Embedding(attr(op, "rows"), attr(op, "dim")));
  if (k == "embedding_bag") {
    const auto mode = op.attrs.value("mode", std::string("mean"));
    if (mode != "mean" && mode != "sum")
      throw GraphError("op '" + op.name + "' (embedding_bag): attr 'mode' is '" + mode + "'; allowed: mean, sum");
    auto options = torch::nn::EmbeddingBagOptions(attr(op, "rows"), attr(op, "dim"));
    if (mode == "sum") options.mode(torch::kSum); else options.mode(torch::kMean);
    return any(torch::nn::EmbeddingBag(options));
  }
  return nullptr;
}

// A tensor and a Python number (`scalar` op): the arithmetic chosen once.
OpFn scalar_of(const Op& op) {
  const auto how = op.attrs.value("op", std::string());
  const double c = op.attrs.value("value", 0.0);
  if (how == "add" || how == "radd") return [c](const Inputs& in) { return in[0] + c; };
  if (how == "sub") return [c](const Inputs& in) { return in[0] - c; };
  if (how == "rsub") return [c](const Inputs& in) { return c - in[0]; };
  if (how == "mul" || how == "rmul") return [c](const Inputs& in) { return in[0] * c; };
  if (how == "div") return [c](const Inputs& in) { return in[0] / c; };
  if (how == "rdiv") return [c](const Inputs& in) { return c / in[0]; };
  throw GraphError("op '" + op.name + "' (scalar): attr 'op' is '" + how +
                   "'; allowed: add, sub, mul, div, radd, rsub, rmul, rdiv");
}

// Note [Dropout]
// ~~~~~~~~~~~~~~
// Active in training passes, off in evaluation. Under a
// RandomScope (the runtime's training forwards, and their recomputation) the
// mask is drawn from the scope's key (see Note [Random ops] in random.h), so a
// micro-batch draws the same mask wherever and however often its stage runs
// it; without one (gradients on, no scope: tests, the profiler) the
// process's generator draws. Masks equal PyTorch's in distribution only.
OpFn dropout_of(const Op& op) {
  const double p = op.attrs.value("p", 0.5);
  if (!(p >= 0 && p < 1)) throw GraphError("op '" + op.name + "' (dropout): attr 'p' must be in [0, 1)");
  const auto block_layer = op.attrs.value("block_layer", std::int64_t{-1});
  return [p, name = op.name, block_layer](const Inputs& in) {
    if (auto rows = block_dropout(name, block_layer, p, in[0])) return *rows;  // See Note [Sampled blocks]
    if (auto seed = random_seed_for(name, 0)) {
      if (p == 0) return in[0];
      const auto& parts = node_parts();  // See Note [Node partitions]: the whole graph's mask, this part's rows
      if (parts && in[0].dim() >= 2 && in[0].size(1) == parts->hi() - parts->lo()) {
        auto shape = in[0].sizes().vec();
        shape[1] = parts->nodes();
        auto keep = torch::empty(shape, in[0].options()).bernoulli_(1 - p, seeded_generator(in[0].device(), *seed));
        return in[0] * keep.slice(1, parts->lo(), parts->hi()) / (1 - p);
      }
      auto keep = torch::empty_like(in[0]).bernoulli_(1 - p, seeded_generator(in[0].device(), *seed));
      return in[0] * keep / (1 - p);
    }
    return torch::dropout(in[0], p, torch::GradMode::is_enabled());
  };
}

OpFn permute_of(const Op& op) {
  std::vector<std::int64_t> dims{0};
  for (auto d : op.attrs.value("dims", std::vector<std::int64_t>{})) dims.push_back(d + 1);
  if (dims.size() != op.output.shape.size() + 1)
    throw GraphError("op '" + op.name + "' (permute): attr 'dims' must order all " +
                     std::to_string(op.output.shape.size()) + " per-sample axes");
  return [dims](const Inputs& in) { return in[0].permute(dims); };
}

// attr label_smoothing (train.label_smoothing) and ignore_index as torch's;
// logits [rows, ..., C] score every position (see Note [Token losses]).
OpFn cross_entropy_of(const Op& op) {
  const double smoothing = op.attrs.value("label_smoothing", 0.0);
  if (!(smoothing >= 0 && smoothing < 1))
    throw GraphError("op '" + op.name + "' (cross_entropy): attr 'label_smoothing' must be in [0, 1)");
  const auto ignore = op.attrs.value("ignore_index", graph::OpGraph::kIgnoreIndex);
  return [smoothing, ignore](const Inputs& in) {
    const auto classes = in[0].size(-1);
    return torch::nn::functional::cross_entropy(
        in[0].reshape({-1, classes}), in[1].reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).label_smoothing(smoothing).ignore_index(
            ignore));
  };
}

// A graph's loss (Note [Graph ops] in zoo/builder.h): per sample, the mean
// cross-entropy over the nodes its mask marks (a mask holds 0s and 1s).
OpFn masked_cross_entropy_of() {
  return [](const Inputs& in) {
    const auto classes = in[0].size(-1);
    auto ce = torch::nn::functional::cross_entropy(in[0].reshape({-1, classes}), in[1].reshape({-1}),
                                                   torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    const auto mask = in[2].to(ce.scalar_type());
    if (const auto& parts = node_parts())  // See Note [Node partitions]: the whole graph's count
      return (ce.reshape(in[1].sizes()) * mask).sum() / std::max(1.0, parts->mask_total);
    if (const auto& c = node_chunks(); c && c->mask_total > 0)  // See Note [Node chunks]
      return (ce.reshape(in[1].sizes()) * mask).sum() * (c->chunks / c->mask_total);
    return ((ce.reshape(in[1].sizes()) * mask).sum(1) / mask.sum(1).clamp_min(1)).sum();
  };
}

// The function of a parameter-free op (axes in attrs are per sample, so the
// batch axis shifts them by one); throws GraphError for an unknown kind.
OpFn function_of(const Op& op) {
  const std::string& k = op.kind;
  // Elementwise, and arithmetic between tensors of one shape.
  if (k == "relu") return [](const Inputs& in) { return torch::relu(in[0]); };
  if (k == "gelu") return [](const Inputs& in) { return torch::gelu(in[0]); };
  if (k == "tanh") return [](const Inputs& in) { return torch::tanh(in[0]); };
  if (k == "sigmoid") return [](const Inputs& in) { return torch::sigmoid(in[0]); };
  if (k == "silu") return [](const Inputs& in) { return torch::silu(in[0]); };
  if (k == "elu") return [](const Inputs& in) { return torch::elu(in[0]); };
  if (k == "dropout") return dropout_of(op);
  if (k == "add") return [](const Inputs& in) { return in[0] + in[1]; };
  if (k == "sub") return [](const Inputs& in) { return in[0] - in[1]; };
  if (k == "mul") return [](const Inputs& in) { return in[0] * in[1]; };
  if (k == "div") return [](const Inputs& in) { return in[0] / in[1]; };
  if (k == "scalar") return scalar_of(op);
  if (k == "matmul") return [](const Inputs& in) { return nn::batched_matmul(in[0], in[1]); };
  // Pooling and reductions.
  if (k == "max_pool2d" || k == "avg_pool2d") {
    const auto kk = pair(op, "kernel"), s = pair(op, "stride"), p = pair(op, "padding");
    if (k == "max_pool2d") return [kk, s, p](const Inputs& in) { return torch::max_pool2d(in[0], kk, s, p); };
    return [kk, s, p](const Inputs& in) { return torch::avg_pool2d(in[0], kk, s, p); };
  }
  if (k == "adaptive_avg_pool2d") {
    const auto size = pair(op, "size");
    return [size](const Inputs& in) { return torch::adaptive_avg_pool2d(in[0], size); };
  }
  if (k == "global_avg_pool") return [](const Inputs& in) { return in[0].mean({2, 3}); };
  if (k == "mean_seq") return [](const Inputs& in) { return in[0].mean(1); };
  if (k == "mean") return [axis = attr(op, "axis") + 1](const Inputs& in) { return in[0].mean(axis); };
  if (k == "sum") return [axis = attr(op, "axis") + 1](const Inputs& in) { return in[0].sum(axis); };
  if (k == "softmax") return [axis = attr(op, "axis") + 1](const Inputs& in) { return torch::softmax(in[0], axis); };
  // Shapes.
  if (k == "flatten") return [](const Inputs& in) { return in[0].flatten(1); };
  if (k == "reshape") {
    std::vector<std::int64_t> shape = {-1};
    for (auto d : op.output.shape) shape.push_back(d);
    return [shape](const Inputs& in) { return in[0].reshape(shape); };
  }
  if (k == "permute") return permute_of(op);
  if (k == "concat") return [axis = attr(op, "axis") + 1](const Inputs& in) { return torch::cat(in, axis); };
  if (k == "stack") return [axis = attr(op, "axis") + 1](const Inputs& in) { return torch::stack(in, axis); };
  if (k == "slice") {
    const auto axis = attr(op, "axis") + 1, start = attr(op, "start"), end = attr(op, "end");
    return [axis, start, end](const Inputs& in) { return in[0].slice(axis, start, end); };
  }
  // Losses: the sum over the batch of each sample's loss (see Note [Loss scale]).
  if (k == "cross_entropy") return cross_entropy_of(op);
  if (k == "masked_cross_entropy") return masked_cross_entropy_of();
  if (k == "mix") {
    const double alpha = op.attrs.value("alpha", 0.0);
    return [alpha](const Inputs& in) { return (1 - alpha) * in[0] + alpha * in[1]; };
  }
  // Each sample's mean squared error over its elements: divided by the rows,
  // PyTorch's mse_loss.
  if (k == "mse")
    return [](const Inputs& in) { return (in[0] - in[1]).pow(2).reshape({in[0].size(0), -1}).mean(1).sum(); };
  throw GraphError("op '" + op.name + "' has kind '" + k + "', which the executor does not implement");
}

}  // namespace

double correct_predictions(const std::string& loss_kind, const torch::Tensor& logits, const torch::Tensor& labels,
                           const torch::Tensor& mask, std::int64_t ignore_index) {
  torch::NoGradGuard no_grad;
  if (loss_kind != "masked_cross_entropy")
    return logits.argmax(-1).eq(labels).logical_and(labels.ne(ignore_index)).sum().item<double>();
  const auto hit = logits.argmax(-1).eq(labels).to(torch::kFloat64), m = mask.to(torch::kFloat64);
  if (const auto& parts = node_parts()) return (hit * m).sum().item<double>() / std::max(1.0, parts->mask_total);
  if (const auto& c = node_chunks(); c && c->mask_total > 0)  // See Note [Node chunks]
    return (hit * m).sum().item<double>() * (c->chunks / c->mask_total);
  return ((hit * m).sum(1) / m.sum(1).clamp_min(1)).sum().item<double>();
}

void GraphModule::place(const std::string& dotted_name, std::shared_ptr<torch::nn::Module> module) {
  torch::nn::Module* parent = this;
  size_t start = 0;
  for (size_t dot; (dot = dotted_name.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string part = dotted_name.substr(start, dot - start);
    auto children = parent->named_children();
    if (auto* found = children.find(part)) {
      parent = found->get();
    } else {
      parent = parent->register_module(part, std::make_shared<torch::nn::Module>()).get();
    }
  }
  parent->register_module(dotted_name.substr(start), std::move(module));
}

torch::Tensor GraphModule::parameter(const graph::ParamSpec& spec) {
  torch::nn::Module* parent = this;
  size_t start = 0;
  for (size_t dot; (dot = spec.name.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string part = spec.name.substr(start, dot - start);
    auto children = parent->named_children();
    if (auto* found = children.find(part)) parent = found->get();
    else parent = parent->register_module(part, std::make_shared<torch::nn::Module>()).get();
  }
  const std::string leaf = spec.name.substr(start);
  auto own = parent->named_parameters(/*recurse=*/false);
  if (auto* found = own.find(leaf)) {
    if (found->sizes() != c10::IntArrayRef(spec.shape))
      throw GraphError("parameter '" + spec.name + "' is read with shapes " + c10::str(found->sizes()) + " and " +
                       graph::to_string(graph::TensorSpec{spec.shape, spec.dtype}));
    return *found;
  }
  return parent->register_parameter(leaf, torch::empty(spec.shape));
}

GraphModule::GraphModule(const graph::OpGraph& graph, std::uint64_t seed,
                         const std::optional<std::set<graph::OpId>>& only)
    : graph_(graph) {
  graph_.validate();
  check_aten_ops(graph_);
  const auto constants = decode_constants(graph_);
  fns_.resize(graph_.size());
  for (graph::OpId id = 0; id < graph_.size(); ++id) {
    if (only && !only->count(id)) continue;
    const Op& op = graph_.op(id);
    if (op.is_input()) {
      fns_[id] = [name = op.name](const std::vector<torch::Tensor>&) -> torch::Tensor {
        throw GraphError("input op '" + name + "' is fed from the dataset, not computed");
      };
    } else if (op.kind == "aten") {
      std::map<std::string, torch::Tensor> params;
      for (const auto& p : op.params) params.emplace(p.name, parameter(p));
      fns_[id] = aten_function(
          graph_, op,
          [&](const std::string& name) {
            auto it = params.find(name);
            if (it == params.end()) throw GraphError("op '" + op.name + "' reads parameter '" + name + "', which it does not declare");
            return it->second;
          },
          constants, &precision_);
    } else if (op.kind == "graph_aggregate") {
      fns_[id] = aggregate_of(op, constants);
    } else if (op.kind == "graph_attention" || op.kind == "block_attention") {  // Note [Graph attention]
      AttentionWeights w{parameter(op.params.at(0)), parameter(op.params.at(1)), op.attrs.value("concat", true)};
      fns_[id] = attention_of(op, w, constants);
    } else if (is_block_op(op.kind)) {  // Note [Sampled blocks]
      fns_[id] = block_op_of(op);
    } else if (op.kind == "positional") {  // a learned position embedding, added
      auto w = parameter(op.params.at(0));
      fns_[id] = [w](const std::vector<torch::Tensor>& in) { return in[0] + w; };
    } else if (op.kind == "unembed") {  // x Eᵀ with an embedding's own table (a tied head)
      auto w = parameter(op.params.at(0));
      fns_[id] = [w](const std::vector<torch::Tensor>& in) { return torch::matmul(in[0], w.t()); };
    } else if (op.kind == "identity_map") {  // GCNII's (1 - beta) x + beta x W^T
      auto w = parameter(op.params.at(0));
      const double beta = op.attrs.value("beta", 0.5);
      fns_[id] = [w, beta](const std::vector<torch::Tensor>& in) {
        return (1 - beta) * in[0] + beta * torch::matmul(in[0], w.t());
      };
    } else if (auto layer = make_layer(op)) {
      place(op.name, layer->ptr());
      fns_[id] = [layer](const std::vector<torch::Tensor>& in) { return layer->forward(in[0]); };
    } else {
      fns_[id] = function_of(op);
    }
  }
  raw_ = fns_;
  initialise(seed);
}

// See Note [Precision policy]: the policy wraps each op's fp32 function; a
// captured program casts per call itself (it reads precision_).
void GraphModule::set_precision(graph::Precision precision) {
  precision_ = precision;
  fns_ = raw_;
  if (precision == graph::Precision::kFp32) return;
  for (graph::OpId id = 0; id < graph_.size(); ++id) {
    const auto& op = graph_.op(id);
    if (!raw_[id] || op.is_input() || op.kind == "aten") continue;
    const auto cls = graph::op_precision(op.kind);
    fns_[id] = [fn = raw_[id], cls](const std::vector<torch::Tensor>& in) {
      auto cast = in;
      cast_inputs(cast, cls);
      if (cls != graph::OpPrecision::kLow) return fn(cast);
      Bf16Autocast bf16;  // the layer's weights, cast at this use
      return fn(cast);
    };
  }
}

// See Note [Initial weights] in graph_module.h.
std::uint64_t parameter_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = fnv1a(name);
  std::uint64_t z = h + seed * 0x9e3779b97f4a7c15ull;  // then a splitmix64 finaliser with the seed
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void GraphModule::initialise(std::uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto all = named_parameters();
  // A parameter several ops read (a head tied to an embedding) starts by the
  // rule of the first op of the whole graph that reads it, so every stage
  // that holds it starts it alike, whichever of those ops it holds.
  std::map<std::string, const Op*> owner;
  for (const auto& op : graph_.ops())
    for (const auto& p : op.params) owner.emplace(p.name, &op);
  std::set<std::string> done;
  for (graph::OpId id = 0; id < graph_.size(); ++id) {
    if (!fns_[id]) continue;
    for (const auto& p : graph_.op(id).params) {
      if (!done.insert(p.name).second) continue;  // shared by an earlier op
      const Op& op = *owner.at(p.name);
      auto* t = all.find(p.name);
      if (!t) throw GraphError("parameter '" + p.name + "' of op '" + op.name + "' has no module");
      if (t->sizes() != c10::IntArrayRef(p.shape))
        throw GraphError("parameter '" + p.name + "' of op '" + op.name + "' (" + op.kind + ") is declared " +
                         graph::to_string(graph::TensorSpec{p.shape, p.dtype}) + " but the op's module holds " +
                         c10::str(t->sizes()));
      auto gen = at::detail::createCPUGenerator(parameter_seed(seed, p.name));
      if (op.kind == "aten" && t->dim() < 2) {
        // See Note [Initial weights] for captured models without a weights file: a
        // vector named "weight" (a norm's scale) starts at one, any other at zero.
        const bool scale = p.name.size() >= 6 && p.name.compare(p.name.size() - 6, 6, "weight") == 0;
        t->fill_(scale ? 1.0 : 0.0);
      } else if (op.kind == "layer_norm" || op.kind == "batch_norm") {
        t->fill_(p.name.size() >= 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0 ? 0.0 : 1.0);
      } else if (op.kind == "embedding_bag" || op.kind == "embedding" || op.kind == "positional") {
        t->normal_(0.0, op.attrs.value("std", 1.0), gen);
      } else if (op.kind == "multihead_attention" && t->dim() == 1) {
        t->zero_();  // as torch.nn.MultiheadAttention starts its biases
      } else {
        // A bias takes the fan-in of its layer's weight (same prefix).
        const auto dot = p.name.rfind('.');
        const auto* w = t->dim() >= 2 ? t : all.find(p.name.substr(0, dot) + ".weight");
        if (!w) throw GraphError("parameter '" + p.name + "' has no sibling weight to take its fan-in from");
        std::int64_t fan_in = 1;
        for (std::int64_t d = 1; d < w->dim(); ++d) fan_in *= w->size(d);
        const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
        t->uniform_(-bound, bound, gen);
      }
    }
  }
}

const OpFn& GraphModule::op_fn(graph::OpId id) const {
  const auto& fn = fns_.at(id);
  if (!fn) throw GraphError("op '" + graph_.op(id).name + "' is not held by this module (another stage owns it)");
  return fn;
}

std::vector<std::pair<std::string, torch::Tensor>> GraphModule::parameters_of(
    const std::vector<graph::OpId>& ops) const {
  auto all = named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::set<std::string> seen;
  for (graph::OpId id : ops) {
    if (!fns_.at(id)) throw GraphError("op '" + graph_.op(id).name + "' is not held by this module (another stage owns it)");
    for (const auto& p : graph_.op(id).params) {
      if (!seen.insert(p.name).second) continue;  // a parameter several ops read (tied weights) counts once
      auto* t = all.find(p.name);
      if (!t) throw GraphError("parameter '" + p.name + "' of op '" + graph_.op(id).name + "' has no module");
      out.emplace_back(p.name, *t);
    }
  }
  return out;
}

void load_weights(GraphModule& module, const std::string& path) {
  auto fail = [&](const std::string& what) { throw GraphError("model.weights " + path + ": " + what); };
  const auto text = read_text_file<GraphError>(path, "model.weights (tools/export writes it)");
  const std::vector<char> bytes(text.begin(), text.end());
  c10::IValue doc;
  try {
    doc = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    why = why.substr(0, why.find('\n'));
    if (why.find("opcode") != std::string::npos && why.find("0x73") != std::string::npos)
      why += "; LibTorch 1.13 cannot read a dict of a single entry: write the file with tools/export";
    fail("not a file torch.save wrote (" + why + ")");
  }
  if (!doc.isGenericDict()) fail("must hold a dict of parameter name to tensor (torch.save(dict(module.state_dict())))");
  std::map<std::string, at::Tensor> weights;
  for (const auto& kv : doc.toGenericDict()) {
    if (!kv.key().isString() || !kv.value().isTensor()) fail("must map parameter names (strings) to tensors");
    if (kv.key().toStringRef() != "__format__") weights[kv.key().toStringRef()] = kv.value().toTensor();
  }
  std::set<std::string> declared;
  for (const auto& op : module.graph().ops())
    for (const auto& p : op.params) declared.insert(p.name);
  for (const auto& [name, t] : weights)
    if (!declared.count(name)) fail("'" + name + "' is no parameter of the model's graph");
  std::vector<graph::OpId> held;
  for (graph::OpId id = 0; id < module.graph().size(); ++id)
    if (module.holds(id)) held.push_back(id);
  torch::NoGradGuard no_grad;
  for (auto& [name, param] : module.parameters_of(held)) {
    auto it = weights.find(name);
    if (it == weights.end()) fail("parameter '" + name + "' is missing");
    if (it->second.sizes() != param.sizes() || it->second.scalar_type() != param.scalar_type())
      fail("parameter '" + name + "' is " + c10::str(it->second.scalar_type(), it->second.sizes()) +
           " but the model declares " + c10::str(param.scalar_type(), param.sizes()));
    param.copy_(it->second);
  }
}

}  // namespace trident::nn
