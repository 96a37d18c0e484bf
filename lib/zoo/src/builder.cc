#include "trident/zoo/builder.h"

#include <cmath>
#include <functional>
#include <numeric>

#include "trident/base/text.h"

namespace trident::zoo {

using graph::DType;
using graph::GraphError;
using graph::Op;
using graph::ParamSpec;

namespace {

// Product of the first `count` axes (all of them by default).
std::int64_t product(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{1}, std::multiplies<>());
}
std::int64_t leading(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end() - 1, std::int64_t{1}, std::multiplies<>());
}

void require(bool ok, const std::string& op, const std::string& what) {
  if (!ok) throw GraphError("op '" + op + "': " + what);
}

std::int64_t pooled(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
  return (size + 2 * pad - kernel) / stride + 1;
}

}  // namespace

OpId GraphBuilder::push(Op op) { return g_.add(std::move(op)); }

OpId GraphBuilder::input(const std::string& field, TensorSpec spec, std::int64_t range) {
  Op op{field, "input", {{"field", field}, {"dtype", graph::to_string(spec.dtype)}}, {}, spec};
  if (range > 0) op.attrs["range"] = range;
  return push(std::move(op));
}

OpId GraphBuilder::linear(const std::string& name, OpId x, std::int64_t out) {
  const auto& s = spec(x);
  require(!s.shape.empty(), name, "linear needs an input with at least one axis");
  const std::int64_t in_f = s.shape.back(), rows = leading(s.shape);
  TensorSpec o = s;
  o.shape.back() = out;
  Op op{name, "linear", {{"in", in_f}, {"out", out}}, {this->in(x)}, o};
  op.params = {{name + ".weight", {out, in_f}}, {name + ".bias", {out}}};
  op.forward_flops = 2.0 * rows * in_f * out;
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::conv2d(const std::string& name, OpId x, std::int64_t out, std::int64_t kernel,
                          std::int64_t stride, std::int64_t padding) {
  const auto& s = spec(x);
  require(s.shape.size() == 3, name, "conv2d needs a [C,H,W] input, got " + graph::to_string(s));
  const std::int64_t c = s.shape[0];
  const std::int64_t h = pooled(s.shape[1], kernel, stride, padding);
  const std::int64_t w = pooled(s.shape[2], kernel, stride, padding);
  require(h > 0 && w > 0, name, "kernel larger than the padded input");
  Op op{name, "conv2d",
        {{"in", c}, {"out", out}, {"kernel", kernel}, {"stride", stride}, {"padding", padding}},
        {in(x)}, {{out, h, w}, s.dtype}};
  op.params = {{name + ".weight", {out, c, kernel, kernel}}, {name + ".bias", {out}}};
  op.forward_flops = 2.0 * c * kernel * kernel * out * h * w;
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::max_pool2d(const std::string& name, OpId x, std::int64_t kernel, std::int64_t stride,
                              std::int64_t padding) {
  const auto& s = spec(x);
  require(s.shape.size() == 3, name, "max_pool2d needs a [C,H,W] input");
  TensorSpec o{{s.shape[0], pooled(s.shape[1], kernel, stride, padding), pooled(s.shape[2], kernel, stride, padding)},
               s.dtype};
  Op op{name, "max_pool2d", {{"kernel", kernel}, {"stride", stride}, {"padding", padding}}, {in(x)}, o};
  op.forward_flops = static_cast<double>(o.elements() * kernel * kernel);
  op.backward_flops = static_cast<double>(o.elements());
  op.activation_bytes = s.bytes() + o.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::global_avg_pool(const std::string& name, OpId x) {
  const auto& s = spec(x);
  require(s.shape.size() == 3, name, "global_avg_pool needs a [C,H,W] input");
  Op op{name, "global_avg_pool", {}, {in(x)}, {{s.shape[0]}, s.dtype}};
  op.forward_flops = op.backward_flops = static_cast<double>(s.elements());
  return push(std::move(op));
}

OpId GraphBuilder::activation(const std::string& name, const std::string& kind, OpId x) {
  require(kind == "relu" || kind == "gelu" || kind == "tanh" || kind == "elu", name, "unknown activation '" + kind + "'");
  const auto& s = spec(x);
  Op op{name, kind, {}, {in(x)}, s};
  op.forward_flops = static_cast<double>(s.elements()) * (kind == "relu" ? 1 : 8);
  op.backward_flops = op.forward_flops;
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::flatten(const std::string& name, OpId x) {
  const auto& s = spec(x);
  return push({name, "flatten", {}, {in(x)}, {{s.elements()}, s.dtype}});
}

OpId GraphBuilder::reshape(const std::string& name, OpId x, std::vector<std::int64_t> shape) {
  const auto& s = spec(x);
  require(product(shape) == s.elements(), name,
          "reshape of " + graph::to_string(s) + " must keep " + std::to_string(s.elements()) + " elements");
  return push({name, "reshape", {{"shape", shape}}, {in(x)}, {shape, s.dtype}});
}

OpId GraphBuilder::concat(const std::string& name, const std::vector<OpId>& xs, std::int64_t axis) {
  require(!xs.empty(), name, "concat needs inputs");
  TensorSpec o = spec(xs[0]);
  require(axis >= 0 && axis < static_cast<std::int64_t>(o.shape.size()), name, "concat axis out of range");
  std::vector<graph::OpInput> inputs;
  o.shape[axis] = 0;
  for (OpId x : xs) {
    const auto& s = spec(x);
    require(s.shape.size() == o.shape.size() && s.dtype == o.dtype, name, "concat inputs differ in rank or dtype");
    for (size_t a = 0; a < s.shape.size(); ++a) {
      if (static_cast<std::int64_t>(a) != axis)
        require(s.shape[a] == spec(xs[0]).shape[a], name, "concat inputs differ off the concat axis");
    }
    o.shape[axis] += s.shape[axis];
    inputs.push_back(in(x));
  }
  return push({name, "concat", {{"axis", axis}}, inputs, o});
}

OpId GraphBuilder::add(const std::string& name, OpId a, OpId b) {
  require(spec(a) == spec(b), name, "add needs equal specs, got " + graph::to_string(spec(a)) + " and " +
                                        graph::to_string(spec(b)));
  Op op{name, "add", {}, {in(a), in(b)}, spec(a)};
  op.forward_flops = static_cast<double>(spec(a).elements());
  return push(std::move(op));
}

OpId GraphBuilder::layer_norm(const std::string& name, OpId x) {
  const auto& s = spec(x);
  const std::int64_t dim = s.shape.back();
  Op op{name, "layer_norm", {{"dim", dim}}, {in(x)}, s};
  op.params = {{name + ".weight", {dim}}, {name + ".bias", {dim}}};
  op.forward_flops = 8.0 * s.elements();
  op.backward_flops = 16.0 * s.elements();
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::self_attention(const std::string& name, OpId x, std::int64_t heads, bool causal) {
  const auto& s = spec(x);
  require(s.shape.size() == 2, name, "self_attention needs a [S,H] input, got " + graph::to_string(s));
  const std::int64_t seq = s.shape[0], h = s.shape[1];
  require(heads > 0 && h % heads == 0, name, "hidden " + std::to_string(h) + " is not divisible by heads " +
                                                 std::to_string(heads));
  Op op{name, "self_attention", {{"hidden", h}, {"heads", heads}}, {in(x)}, s};
  if (causal) op.attrs["causal"] = true;
  op.params = {{name + ".in_proj.weight", {3 * h, h}},
               {name + ".in_proj.bias", {3 * h}},
               {name + ".out_proj.weight", {h, h}},
               {name + ".out_proj.bias", {h}}};
  op.forward_flops = 2.0 * seq * h * 4 * h + 4.0 * seq * seq * h;
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = (5 * seq * h + heads * seq * seq) * graph::element_bytes(s.dtype);
  return push(std::move(op));
}

OpId GraphBuilder::mean_seq(const std::string& name, OpId x) {
  const auto& s = spec(x);
  require(s.shape.size() == 2, name, "mean_seq needs a [S,H] input");
  Op op{name, "mean_seq", {}, {in(x)}, {{s.shape[1]}, s.dtype}};
  op.forward_flops = op.backward_flops = static_cast<double>(s.elements());
  return push(std::move(op));
}

OpId GraphBuilder::embedding(const std::string& name, OpId ids, std::int64_t rows, std::int64_t dim, double std) {
  const auto& s = spec(ids);
  require(s.dtype == DType::kInt64 && !s.shape.empty(), name, "embedding needs int64 ids, e.g. [T]");
  require(rows > 0 && dim > 0, name, "embedding needs positive rows and dim");
  auto shape = s.shape;
  shape.push_back(dim);
  Op op{name, "embedding", {{"rows", rows}, {"dim", dim}, {"std", std}}, {in(ids)}, {shape, DType::kFloat32}};
  op.params = {{name + ".weight", {rows, dim}}};
  op.forward_flops = static_cast<double>(s.elements() * dim);
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::positional(const std::string& name, OpId x, double std) {
  const auto& s = spec(x);
  require(s.shape.size() == 2, name, "positional needs a [T, d] input, got " + graph::to_string(s));
  Op op{name, "positional", {{"std", std}}, {in(x)}, s};
  op.params = {{name + ".weight", s.shape}};
  op.forward_flops = op.backward_flops = static_cast<double>(s.elements());
  return push(std::move(op));
}

OpId GraphBuilder::unembed(const std::string& name, OpId x, const std::string& table) {
  const auto& s = spec(x);
  const graph::ParamSpec* found = nullptr;
  for (const auto& op : g_.ops())
    for (const auto& p : op.params)
      if (p.name == table) found = &p;
  require(found && found->shape.size() == 2, name, "unembed reads parameter '" + table + "', which no earlier op holds");
  const std::int64_t rows = found->shape[0], dim = found->shape[1];
  require(!s.shape.empty() && s.shape.back() == dim, name,
          "unembed needs [..., " + std::to_string(dim) + "] input, got " + graph::to_string(s));
  auto shape = s.shape;
  shape.back() = rows;
  Op op{name, "unembed", {{"table", table}}, {in(x)}, {shape, s.dtype}};
  op.params = {*found};  // the same parameter: tied (see Note [Tied parameters] in executor/tied_params.h)
  op.forward_flops = 2.0 * static_cast<double>(s.elements()) * rows;
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = s.bytes() + graph::TensorSpec{shape, s.dtype}.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::embedding_bag(const std::string& name, OpId ids, std::int64_t rows, std::int64_t dim) {
  const auto& s = spec(ids);
  require(s.dtype == DType::kInt64 && s.shape.size() == 1, name, "embedding_bag needs int64 [bag] ids");
  Op op{name, "embedding_bag", {{"rows", rows}, {"dim", dim}}, {in(ids)}, {{dim}, DType::kFloat32}};
  op.params = {{name + ".weight", {rows, dim}}};
  op.forward_flops = static_cast<double>(s.shape[0] * dim);
  op.backward_flops = op.forward_flops;
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

// [C] logits and a [] label per sample; or a label per position, [..., T, C]
// and [..., T] (see Note [Token losses] in graph/op_graph.h).
OpId GraphBuilder::cross_entropy(const std::string& name, OpId logits, OpId label) {
  const auto& s = spec(logits);
  require(!s.shape.empty(), name, "cross_entropy needs [C] or [..., T, C] logits");
  const std::vector<std::int64_t> positions(s.shape.begin(), s.shape.end() - 1);
  require(spec(label) == TensorSpec{positions, DType::kInt64}, name,
          "cross_entropy needs int64 labels of the logits' shape without its last axis");
  Op op{name, "cross_entropy", {}, {in(logits), in(label)}, {{}, DType::kFloat32}};
  op.forward_flops = op.backward_flops = 4.0 * s.elements();
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::dropout(const std::string& name, OpId x, double p, std::int64_t block_layer) {
  require(p >= 0 && p < 1, name, "dropout p must be in [0, 1)");
  Op op{name, "dropout", {{"p", p}}, {in(x)}, spec(x)};
  if (block_layer >= 0) op.attrs["block_layer"] = block_layer;
  op.forward_flops = op.backward_flops = static_cast<double>(spec(x).elements());
  op.activation_bytes = spec(x).bytes();  // the mask, at most
  return push(std::move(op));
}

// See Note [Graph ops] in builder.h.
OpId GraphBuilder::graph_aggregate(const std::string& name, OpId x, const std::string& adjacency, std::int64_t nnz,
                                   std::int64_t nodes, int chunks) {
  const auto& s = spec(x);
  require(s.shape.size() == 2, name, "graph_aggregate needs [nodes, features], got " + graph::to_string(s));
  Op op{name, "graph_aggregate", {{"adjacency", adjacency}, {"nodes", nodes ? nodes : s.shape[0]}, {"nnz", nnz}}, {in(x)}, s};
  if (chunks > 1) op.attrs["chunks"] = chunks, nnz = (nnz + chunks - 1) / chunks;  // one chunk's rows, on average
  op.forward_flops = 2.0 * static_cast<double>(nnz) * static_cast<double>(s.shape[1]);
  op.backward_flops = op.forward_flops;  // A^T G: no weights, nothing kept but A
  return push(std::move(op));
}

namespace {

// The per-sample spec of `rows` rows of width d: [d] for one row (a seed's
// own), else [ceil(rows), d] (Note [Sampled blocks]).
TensorSpec rows_spec(double rows, std::int64_t d) {
  const auto r = static_cast<std::int64_t>(std::ceil(rows - 1e-9));
  return r <= 1 ? TensorSpec{{d}, graph::DType::kFloat32} : TensorSpec{{r, d}, graph::DType::kFloat32};
}

}  // namespace

OpId GraphBuilder::attention(const std::string& name, OpId z, Attention a, std::int64_t layer, double rows,
                             double nnz, const std::string& adjacency) {
  const auto& s = spec(z);
  require(a.heads >= 1 && a.width >= 1 && !s.shape.empty() && s.shape.back() == a.heads * a.width, name,
          "attention needs [..., heads x width] projected rows, got " + graph::to_string(s));
  const std::int64_t out = a.concat ? a.heads * a.width : a.width;
  const bool block = layer >= 0;
  Op op{name, block ? "block_attention" : "graph_attention",
        {{"heads", a.heads}, {"width", a.width}, {"concat", a.concat}}, {in(z)},
        block ? rows_spec(rows, out) : TensorSpec{{s.shape[0], out}, s.dtype}};
  if (block) op.attrs["layer"] = layer;
  else op.attrs["adjacency"] = adjacency;
  op.params = {{name + ".attn_l", {a.heads, a.width}}, {name + ".attn_r", {a.heads, a.width}}};
  const double in_rows = static_cast<double>(s.elements() / s.shape.back()), hw = static_cast<double>(a.heads * a.width);
  op.forward_flops = 2.0 * in_rows * hw + 8.0 * nnz * hw;
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = s.bytes() + static_cast<std::int64_t>(4 * 2 * nnz * hw);
  return push(std::move(op));
}

OpId GraphBuilder::block_features(const std::string& name, OpId node, double rows, std::int64_t features,
                                  const std::string& graph, const std::vector<int>& fanouts, bool replace,
                                  std::int64_t embedding) {
  require(spec(node) == TensorSpec{{}, graph::DType::kInt64}, name, "block_features reads the int64 [] seed node id");
  require(embedding >= 0, name, "block_features: an embedding width >= 0");
  Op op{name, "block_features", {{"graph", graph}, {"fanouts", fanouts}, {"replace", replace}}, {in(node)},
        rows_spec(rows, features + embedding)};
  if (embedding) op.attrs["embedding"] = embedding;
  return push(std::move(op));
}

OpId GraphBuilder::block_aggregate(const std::string& name, OpId x, std::int64_t layer, const std::string& norm,
                                   double rows, double edges) {
  const auto& s = spec(x);
  require(!s.shape.empty() && layer >= 0, name, "block_aggregate needs [rows, d] and a layer >= 0");
  require(norm == "mean" || norm == "gcn", name, "block_aggregate norm is mean or gcn, not '" + norm + "'");
  Op op{name, "block_aggregate", {{"layer", layer}, {"norm", norm}}, {in(x)}, rows_spec(rows, s.shape.back())};
  op.forward_flops = op.backward_flops = 2.0 * edges * static_cast<double>(s.shape.back());
  return push(std::move(op));
}

OpId GraphBuilder::block_targets(const std::string& name, OpId x, std::int64_t layer, double rows) {
  const auto& s = spec(x);
  require(!s.shape.empty() && layer >= 0, name, "block_targets needs [rows, d] and a layer >= 0");
  return push({name, "block_targets", {{"layer", layer}}, {in(x)}, rows_spec(rows, s.shape.back())});
}

OpId GraphBuilder::mix(const std::string& name, OpId a, OpId b, double alpha) {
  require(spec(a) == spec(b), name, "mix needs two inputs of one spec");
  Op op{name, "mix", {{"alpha", alpha}}, {in(a), in(b)}, spec(a)};
  op.forward_flops = 3.0 * static_cast<double>(spec(a).elements());
  op.backward_flops = 2.0 * static_cast<double>(spec(a).elements());
  return push(std::move(op));
}

OpId GraphBuilder::identity_map(const std::string& name, OpId x, double beta) {
  const auto& s = spec(x);
  require(!s.shape.empty(), name, "identity_map needs an input with at least one axis");
  const std::int64_t d = s.shape.back();
  Op op{name, "identity_map", {{"dim", d}, {"beta", beta}}, {in(x)}, s};
  op.params = {{name + ".weight", {d, d}}};
  op.forward_flops = 2.0 * static_cast<double>(leading(s.shape) * d * d) + 3.0 * static_cast<double>(s.elements());
  op.backward_flops = 2 * op.forward_flops;
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

OpId GraphBuilder::masked_cross_entropy(const std::string& name, OpId logits, OpId label, OpId mask) {
  const auto& s = spec(logits);
  require(s.shape.size() == 2, name, "masked_cross_entropy needs [nodes, classes] logits");
  require(spec(label) == TensorSpec{{s.shape[0]}, DType::kInt64}, name, "masked_cross_entropy needs int64 [nodes] labels");
  require(spec(mask) == TensorSpec{{s.shape[0]}, DType::kFloat32}, name, "masked_cross_entropy needs a float32 [nodes] mask");
  Op op{name, "masked_cross_entropy", {}, {in(logits), in(label), in(mask)}, {{}, DType::kFloat32}};
  op.forward_flops = op.backward_flops = 4.0 * static_cast<double>(s.elements());
  op.activation_bytes = s.bytes();
  return push(std::move(op));
}

void GraphBuilder::constant(const std::string& name, const std::string& dtype, const std::vector<std::int64_t>& shape,
                            const std::string& bytes) {
  constants_[name] = {{"dtype", dtype}, {"shape", shape}, {"base64", base64_encode(bytes)}};
}

OpGraph GraphBuilder::finish() {
  if (!constants_.is_null()) g_.set_capture(nullptr, constants_);
  g_.validate();
  return std::move(g_);
}

}  // namespace trident::zoo
