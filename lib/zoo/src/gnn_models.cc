// Graph neural networks for full-graph training on the graph that
// ModelSpec::graph names (Note [Graphs as data] in gnn/graph_data.h):
//   gcn2       Kipf and Welling's two-layer GCN: A relu(A X W1) W2, dropout 0.5
//   sage2      two GraphSAGE layers with the mean aggregator (Hamilton et al.
//              2017): h' = W_s h + M (W_n h), M = D^-1 A (mean_adjacency:
//              the neighbours' mean, computed after their linear map, so
//              W_n's bias reaches nodes with neighbours), dropout 0.5
//   gcniiN     GCNII (Chen et al. 2020): H0 = relu(X W_in) feeds every layer,
//              H = relu(((1 - a) A H + a H0)((1 - b_l) I + b_l W_l)),
//              a = 0.1, b_l = ln(0.5 / l + 1), dropout 0.6; a fan-out DAG
//   jk_gcn16   16 GCN layers whose outputs all feed the head (jumping
//              knowledge by concatenation, Xu et al. 2018): a fan-in DAG
//   appnp      APPNP (Klicpera et al. 2019): an MLP's predictions H
//              propagated 10 times, Z = (1 - a) A Z + a H, a = 0.1
//   graph_mlp  the MLP on the same nodes and labels, for comparison
//   sageN      N GraphSAGE-mean layers (sage2 above; any N up to 16)
//   gat2       GAT (Velickovic et al. 2018): 8 heads of 8 concatenated, elu,
//              then one head of the classes; dropout 0.6; each layer a
//              linear projection, then attention (Note [Graph attention]
//              in nn/sampled_blocks.h)
// Hidden width 16 under `tiny` (64 for gcnii, as its paper), 64 under `paper`;
// model.hidden sets it.
//
// With model.fanouts, gcn2, sageN and gat2 train on sampled blocks (Note
// [Sampled blocks] in nn/sampled_blocks.h): the same layers and parameter
// names, block ops instead of the full graph's.
#include "gnn_models.h"

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "trident/gnn/graph_data.h"
#include "trident/zoo/builder.h"

namespace trident::zoo {
namespace {

using graph::DType;

struct Inputs {
  OpId x, label, mask;
  std::int64_t nnz = 0, classes = 0, nodes = 0;
  int chunks = 0;  // See Note [Node chunks] in nn/node_chunks.h
};

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The dataset fields and the adjacency constant "adjacency": GCN's, or
// under `mean` GraphSAGE's mean aggregator.
Inputs graph_inputs(GraphBuilder& b, const ModelSpec& s, bool mean = false) {
  const auto g = gnn::load_graph(s.graph.empty() ? "csbm" : s.graph, /*with_features=*/false);
  const auto a = mean ? gnn::mean_adjacency(g) : gnn::gcn_adjacency(g);
  std::vector<std::int64_t> index(a.rows);
  index.insert(index.end(), a.cols.begin(), a.cols.end());
  b.constant("adjacency.index", "int64", {2, a.nnz()}, bytes_of(index));
  b.constant("adjacency.weight", "float32", {a.nnz()}, bytes_of(a.weights));
  Inputs in;
  // A chunked graph's sample is one chunk, padded to the largest (Note [Node chunks]).
  if (s.graph_chunks < 0 || s.graph_chunks > g.nodes)
    throw graph::GraphError("model.graph_chunks = " + std::to_string(s.graph_chunks) + ": allowed 0 or 1 (the whole graph) or 2 to the graph's " +
                            std::to_string(g.nodes) + " nodes");
  in.chunks = s.graph_chunks > 1 ? static_cast<int>(s.graph_chunks) : 0;
  const auto rows = in.chunks ? gnn::even_bounds(g.nodes, in.chunks)[1] : g.nodes;
  in.x = b.input("features", {{rows, g.features}, DType::kFloat32});
  in.label = b.input("label", {{rows}, DType::kInt64});
  in.mask = b.input("mask", {{rows}, DType::kFloat32});
  in.nnz = a.nnz(), in.classes = g.classes, in.nodes = g.nodes;
  return in;
}

OpId aggregate(GraphBuilder& b, const Inputs& in, const std::string& name, OpId x) {
  return b.graph_aggregate(name, x, "adjacency", in.nnz, in.nodes, in.chunks);
}

std::int64_t hidden(const ModelSpec& s, std::int64_t tiny) {
  return s.hidden > 0 ? s.hidden : s.preset == "paper" ? 64 : tiny;
}

// A sampled model's inputs (Note [Sampled blocks]): the seed's id and label,
// and per layer the rows and edges a seed adds on average — per-sample
// sizes for the planner's FLOPs and bytes, estimated from the degrees
// without counting shared neighbours once (so an upper estimate).
struct Sampled {
  OpId node, label;
  std::vector<double> rows;   // rows[l]: block l's sources per seed; rows[L] = 1, the seed
  std::vector<double> edges;  // edges[l]: block l's sampled edges per seed
  std::int64_t features = 0, classes = 0;
};

struct SampledSizes {
  std::vector<double> rows, edges;
  std::int64_t features = 0, classes = 0;
};

SampledSizes sampled_sizes(const ModelSpec& s, int layers) {
  static std::map<std::string, SampledSizes> memo;  // a generated graph is made once per process
  static std::mutex mutex;
  std::string key = s.graph + (s.sample_replace ? "|r" : "|");
  for (int k : s.fanouts) key += "," + std::to_string(k);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  const auto g = gnn::load_graph(s.graph.empty() ? "csbm" : s.graph, /*with_features=*/false);
  if (static_cast<int>(s.fanouts.size()) != layers)
    throw gnn::GraphDataError("model.fanouts: " + std::to_string(s.fanouts.size()) + " fan-outs for model '" + s.name +
                              "', which has " + std::to_string(layers) + " layers; give one per layer, the input layer first");
  for (std::size_t l = 0; l < s.fanouts.size(); ++l)
    if (s.fanouts[l] == 0 || s.fanouts[l] < -1)
      throw gnn::GraphDataError("model.fanouts[" + std::to_string(l) + "] = " + std::to_string(s.fanouts[l]) +
                                ": a fan-out is at least 1, or -1 for every neighbour");
  std::vector<std::int64_t> degree(static_cast<std::size_t>(g.nodes), 0);
  for (auto d : g.dst) ++degree[static_cast<std::size_t>(d)];
  SampledSizes z;
  z.features = g.features, z.classes = g.classes;
  z.rows.assign(static_cast<std::size_t>(layers) + 1, 1.0);
  z.edges.assign(static_cast<std::size_t>(layers), 0.0);
  for (int l = layers - 1; l >= 0; --l) {
    const std::int64_t k = s.fanouts[static_cast<std::size_t>(l)];
    double kept = 0;
    for (auto d : degree) kept += static_cast<double>(k < 0 ? d : s.sample_replace ? (d ? k : 0) : std::min(d, k));
    kept /= static_cast<double>(std::max<std::int64_t>(1, g.nodes));
    const auto i = static_cast<std::size_t>(l);
    z.edges[i] = z.rows[i + 1] * kept;
    z.rows[i] = std::min(static_cast<double>(g.nodes), z.rows[i + 1] * (1 + kept));
  }
  return memo[key] = z;
}

Sampled sampled_inputs(GraphBuilder& b, const ModelSpec& s, int layers) {
  const auto z = sampled_sizes(s, layers);
  Sampled in;
  in.rows = z.rows, in.edges = z.edges, in.features = z.features, in.classes = z.classes;
  in.node = b.input("node", {{}, DType::kInt64});
  in.label = b.input("label", {{}, DType::kInt64});
  return in;
}

std::size_t at(int l) { return static_cast<std::size_t>(l); }

// Block 0's input rows: the features, each followed by the node's learnable
// embedding when model.node_embedding is set.
OpId block_inputs(GraphBuilder& b, const ModelSpec& s, const Sampled& in) {
  return b.block_features("features", in.node, in.rows[0], in.features, s.graph.empty() ? "csbm" : s.graph, s.fanouts,
                          s.sample_replace, std::max<std::int64_t>(0, s.node_embedding));
}

OpId gcn_layer(GraphBuilder& b, const Inputs& in, const std::string& p, OpId x, std::int64_t out) {
  return aggregate(b, in, p + ".aggregate", b.linear(p, x, out));
}

graph::OpGraph sampled_gcn2(const ModelSpec& s) {
  GraphBuilder b("gcn2");
  const auto in = sampled_inputs(b, s, 2);
  auto layer = [&](int l, OpId x, std::int64_t out) {
    const auto p = "conv" + std::to_string(l);
    return b.block_aggregate(p + ".aggregate", b.linear(p, x, out), l, "gcn", in.rows[at(l + 1)], in.edges[at(l)] + in.rows[at(l + 1)]);
  };
  OpId x = block_inputs(b, s, in);
  x = b.activation("conv0.relu", "relu", layer(0, b.dropout("conv0.dropout", x, 0.5, 0), hidden(s, 16)));
  x = layer(1, b.dropout("conv1.dropout", x, 0.5, 1), in.classes);
  b.cross_entropy("loss", x, in.label);
  return b.finish();
}

graph::OpGraph gcn2(const ModelSpec& s) {
  if (!s.fanouts.empty()) return sampled_gcn2(s);
  GraphBuilder b("gcn2");
  const auto in = graph_inputs(b, s);
  OpId x = b.dropout("conv0.dropout", in.x, 0.5);
  x = b.activation("conv0.relu", "relu", gcn_layer(b, in, "conv0", x, hidden(s, 16)));
  x = gcn_layer(b, in, "conv1", b.dropout("conv1.dropout", x, 0.5), in.classes);
  b.masked_cross_entropy("loss", x, in.label, in.mask);
  return b.finish();
}

// One GraphSAGE-mean layer of width `out`: the neighbours' mean of W_n h
// when the layer narrows (fewer rows of the smaller width to average), else
// W_n times the neighbours' mean of h (DGL's SAGEConv chooses alike). The
// two are equal but for W_n's bias, which the second gives a node without
// neighbours too.
OpId sage_layer(GraphBuilder& b, const Inputs& in, const std::string& p, OpId x, std::int64_t out) {
  const bool narrows = b.spec(x).shape.back() > out;
  const auto neigh = narrows ? aggregate(b, in, p + ".aggregate", b.linear(p + ".neigh", x, out))
                             : b.linear(p + ".neigh", aggregate(b, in, p + ".aggregate", x), out);
  return b.add(p + ".add", b.linear(p + ".self", x, out), neigh);
}

// N GraphSAGE-mean layers, relu between, dropout 0.5 before each.
graph::OpGraph sage(const ModelSpec& s, int layers) {
  GraphBuilder b("sage" + std::to_string(layers));
  auto width = [&](int l, std::int64_t classes) { return l == layers - 1 ? classes : hidden(s, 16); };
  if (s.fanouts.empty()) {
    const auto in = graph_inputs(b, s, /*mean=*/true);
    OpId x = in.x;
    for (int l = 0; l < layers; ++l) {
      const auto p = "conv" + std::to_string(l);
      x = sage_layer(b, in, p, b.dropout(p + ".dropout", x, 0.5), width(l, in.classes));
      if (l < layers - 1) x = b.activation(p + ".relu", "relu", x);
    }
    b.masked_cross_entropy("loss", x, in.label, in.mask);
    return b.finish();
  }
  const auto in = sampled_inputs(b, s, layers);
  OpId x = block_inputs(b, s, in);
  for (int l = 0; l < layers; ++l) {
    const auto p = "conv" + std::to_string(l);
    x = b.dropout(p + ".dropout", x, 0.5, l);
    const auto out = width(l, in.classes);
    const auto self = b.linear(p + ".self", b.block_targets(p + ".targets", x, l, in.rows[at(l + 1)]), out);
    auto mean = [&](OpId h) {
      return b.block_aggregate(p + ".aggregate", h, l, "mean", in.rows[at(l + 1)], in.edges[at(l)]);
    };
    const auto neigh = b.spec(x).shape.back() > out ? mean(b.linear(p + ".neigh", x, out))  // as sage_layer
                                                    : b.linear(p + ".neigh", mean(x), out);
    x = b.add(p + ".add", self, neigh);
    if (l < layers - 1) x = b.activation(p + ".relu", "relu", x);
  }
  b.cross_entropy("loss", x, in.label);
  return b.finish();
}

// GAT: 8 heads of model.hidden (8 by default) concatenated, elu, one head of
// the classes; on the full graph or, with fan-outs, on blocks.
graph::OpGraph gat2(const ModelSpec& s) {
  GraphBuilder b("gat2");
  const GraphBuilder::Attention first{8, s.hidden > 0 ? s.hidden : 8, true};
  const bool sampled = !s.fanouts.empty();
  std::int64_t classes = 0;
  double nnz = 0;
  Sampled in;
  OpId x, mask = -1;
  if (sampled) {
    in = sampled_inputs(b, s, 2);
    classes = in.classes;
    x = block_inputs(b, s, in);
  } else {
    const auto full = graph_inputs(b, s);
    in.label = full.label, mask = full.mask, classes = full.classes, nnz = static_cast<double>(full.nnz);
    x = full.x;
  }
  // A layer: dropout, the projection (its bias is the layer's: the attention weights sum to 1), attention.
  auto layer = [&](int l, OpId h, GraphBuilder::Attention a) {
    const auto p = "conv" + std::to_string(l);
    h = b.linear(p, b.dropout(p + ".dropout", h, 0.6, sampled ? l : -1), a.heads * a.width);
    return sampled ? b.attention(p + ".attend", h, a, l, in.rows[at(l + 1)], in.edges[at(l)] + in.rows[at(l + 1)])
                   : b.attention(p + ".attend", h, a, -1, 0, nnz);
  };
  x = b.activation("conv0.elu", "elu", layer(0, x, first));
  x = layer(1, x, {1, classes, false});
  if (sampled) b.cross_entropy("loss", x, in.label);
  else b.masked_cross_entropy("loss", x, in.label, mask);
  return b.finish();
}

graph::OpGraph gcnii(const ModelSpec& s, int layers) {
  GraphBuilder b("gcnii" + std::to_string(layers));
  const auto in = graph_inputs(b, s);
  const double alpha = 0.1, lambda = 0.5, p = 0.6;
  OpId h0 = b.activation("input.relu", "relu", b.linear("input", b.dropout("input.dropout", in.x, p), hidden(s, 64)));
  OpId h = h0;
  for (int l = 1; l <= layers; ++l) {
    const std::string name = "conv" + std::to_string(l);
    OpId a = aggregate(b, in, name + ".aggregate", b.dropout(name + ".dropout", h, p));
    a = b.mix(name + ".initial", a, h0, alpha);
    h = b.activation(name + ".relu", "relu", b.identity_map(name, a, std::log(lambda / l + 1)));
  }
  OpId out = b.linear("output", b.dropout("output.dropout", h, p), in.classes);
  b.masked_cross_entropy("loss", out, in.label, in.mask);
  return b.finish();
}

graph::OpGraph jk_gcn(const ModelSpec& s, int layers) {
  GraphBuilder b("jk_gcn" + std::to_string(layers));
  const auto in = graph_inputs(b, s);
  std::vector<OpId> outs;
  OpId x = in.x;
  for (int l = 0; l < layers; ++l) {
    const std::string name = "conv" + std::to_string(l);
    x = b.activation(name + ".relu", "relu", gcn_layer(b, in, name, b.dropout(name + ".dropout", x, 0.5), hidden(s, 16)));
    outs.push_back(x);
  }
  OpId jk = b.concat("jump", outs, 1);
  b.masked_cross_entropy("loss", b.linear("head", b.dropout("head.dropout", jk, 0.5), in.classes), in.label, in.mask);
  return b.finish();
}

// The MLP part of APPNP, and graph_mlp alone.
OpId node_mlp(GraphBuilder& b, const Inputs& in, const ModelSpec& s) {
  OpId x = b.activation("fc0.relu", "relu", b.linear("fc0", b.dropout("fc0.dropout", in.x, 0.5), hidden(s, 64)));
  return b.linear("fc1", b.dropout("fc1.dropout", x, 0.5), in.classes);
}

graph::OpGraph appnp(const ModelSpec& s) {
  GraphBuilder b("appnp");
  const auto in = graph_inputs(b, s);
  const OpId h = node_mlp(b, in, s);
  OpId z = h;
  for (int k = 0; k < 10; ++k) {
    const std::string name = "propagate" + std::to_string(k);
    z = b.mix(name + ".teleport", aggregate(b, in, name, z), h, 0.1);
  }
  b.masked_cross_entropy("loss", z, in.label, in.mask);
  return b.finish();
}

graph::OpGraph graph_mlp(const ModelSpec& s) {
  GraphBuilder b("graph_mlp");
  const auto in = graph_inputs(b, s);
  b.masked_cross_entropy("loss", node_mlp(b, in, s), in.label, in.mask);
  return b.finish();
}

// N of "<prefix>N" when the rest is a number in 1..1024, else 0.
int depth_of(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 4) return 0;
  int n = 0;
  for (char c : name.substr(prefix.size())) {
    if (c < '0' || c > '9') return 0;
    n = 10 * n + (c - '0');
  }
  return n >= 1 && n <= 1024 && name[prefix.size()] != '0' ? n : 0;
}

}  // namespace

bool is_gnn_model(const std::string& name) {
  return name == "gcn2" || name == "gat2" || name == "appnp" || name == "graph_mlp" || depth_of(name, "gcnii") ||
         depth_of(name, "jk_gcn") || (depth_of(name, "sage") && depth_of(name, "sage") <= 16);
}

int sampled_layers(const std::string& name) {
  if (name == "gcn2" || name == "gat2") return 2;
  const int n = depth_of(name, "sage");
  return n <= 16 ? n : 0;
}

graph::OpGraph gnn_model(const ModelSpec& spec) {
  if (spec.node_embedding > 0 && spec.fanouts.empty())
    throw graph::GraphError("model.node_embedding = " + std::to_string(spec.node_embedding) +
                            ": learnable node embeddings train on sampled mini-batches; set model.fanouts too");
  if (spec.name == "gcn2") return gcn2(spec);
  if (spec.name == "gat2") return gat2(spec);
  if (int n = depth_of(spec.name, "sage"); n && n <= 16) return sage(spec, n);
  if (!spec.fanouts.empty() || spec.node_embedding)
    throw graph::GraphError("model.fanouts: model '" + spec.name + "' trains on the whole graph only; sampled "
                            "training (fan-outs) is built for gcn2, sageN and gat2");
  if (spec.name == "appnp") return appnp(spec);
  if (spec.name == "graph_mlp") return graph_mlp(spec);
  if (int n = depth_of(spec.name, "gcnii")) return gcnii(spec, n);
  return jk_gcn(spec, depth_of(spec.name, "jk_gcn"));
}

}  // namespace trident::zoo
