// The zoo's models. Sizes of the `paper` presets follow docs/algorithms.md §2
// (GraphPipe App. A.2); `tiny` presets are small enough to train on 2 cores.
#include "trident/zoo/zoo.h"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>

#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/zoo/builder.h"
#include "gnn_models.h"

namespace trident::zoo {
namespace {

using graph::DType;

bool paper(const ModelSpec& s) { return s.preset == "paper"; }
std::string at(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

OpId image_input(GraphBuilder& b) { return b.input("image", {{1, 28, 28}, DType::kFloat32}); }
OpId label_input(GraphBuilder& b) { return b.input("label", {{}, DType::kInt64}); }

// Pre-norm encoder layer: x + attn(ln1(x)), then + fc2(gelu(fc1(ln2(x)))); a
// decoder's attention is causal.
OpId encoder_layer(GraphBuilder& b, const std::string& p, OpId x, std::int64_t heads, std::int64_t ffn,
                   bool causal = false) {
  const std::int64_t hidden = b.spec(x).shape.back();
  OpId a = b.self_attention(at(p, "attn"), b.layer_norm(at(p, "ln1"), x), heads, causal);
  x = b.add(at(p, "res1"), x, a);
  OpId f = b.linear(at(p, "fc1"), b.layer_norm(at(p, "ln2"), x), ffn);
  f = b.linear(at(p, "fc2"), b.activation(at(p, "gelu"), "gelu", f), hidden);
  return b.add(at(p, "res2"), x, f);
}

// Linear + ReLU layers.
OpId feed_forward(GraphBuilder& b, const std::string& p, OpId x, int layers, std::int64_t hidden) {
  for (int l = 0; l < layers; ++l) {
    const std::string name = at(p, "fc" + std::to_string(l));
    x = b.activation(name + "_relu", "relu", b.linear(name, x, hidden));
  }
  return x;
}

graph::OpGraph mlp(const ModelSpec& s) {
  const std::int64_t hidden = paper(s) ? 4096 : 256;
  const int layers = paper(s) ? 8 : 2;
  GraphBuilder b("mlp");
  OpId x = b.flatten("flatten", image_input(b));
  x = feed_forward(b, "", x, layers, hidden);
  b.cross_entropy("loss", b.linear("head", x, 10), label_input(b));
  return b.finish();
}

graph::OpGraph cnn(const ModelSpec& s) {
  const std::int64_t c1 = paper(s) ? 128 : 32, c2 = paper(s) ? 256 : 64, fc = paper(s) ? 1024 : 128;
  GraphBuilder b("cnn");
  OpId x = image_input(b);
  x = b.max_pool2d("pool1", b.activation("relu1", "relu", b.conv2d("conv1", x, c1, 5, 1, 2)), 2, 2);
  x = b.max_pool2d("pool2", b.activation("relu2", "relu", b.conv2d("conv2", x, c2, 5, 1, 2)), 2, 2);
  x = b.activation("fc1_relu", "relu", b.linear("fc1", b.flatten("flatten", x), fc));
  b.cross_entropy("loss", b.linear("head", x, 10), label_input(b));
  return b.finish();
}

// An inception block: four parallel branches joined along channels.
OpId inception_block(GraphBuilder& b, const std::string& p, OpId x, std::int64_t w) {
  auto conv = [&](const std::string& n, OpId in, std::int64_t out, std::int64_t k) {
    return b.activation(at(p, n + "_relu"), "relu", b.conv2d(at(p, n), in, out, k, 1, k / 2));
  };
  OpId b1 = conv("b1.conv", x, w, 1);
  OpId b2 = conv("b2.conv3", conv("b2.reduce", x, w / 2, 1), w, 3);
  OpId b3 = conv("b3.conv5", conv("b3.reduce", x, w / 4, 1), w / 2, 5);
  OpId b4 = conv("b4.proj", b.max_pool2d(at(p, "b4.pool"), x, 3, 1, 1), w / 2, 1);
  return b.concat(at(p, "concat"), {b1, b2, b3, b4}, 0);
}

graph::OpGraph inception(const ModelSpec& s) {
  const std::int64_t stem = paper(s) ? 64 : 32, w1 = paper(s) ? 64 : 32, w2 = paper(s) ? 128 : 48;
  GraphBuilder b("inception");
  OpId x = b.activation("stem_relu", "relu", b.conv2d("stem", image_input(b), stem, 3, 1, 1));
  x = b.max_pool2d("pool1", x, 2, 2);
  x = b.max_pool2d("pool2", inception_block(b, "block1", x, w1), 2, 2);
  x = b.max_pool2d("pool3", inception_block(b, "block2", x, w2), 2, 2);
  x = b.activation("head.fc_relu", "relu", b.linear("head.fc", b.flatten("flatten", x), paper(s) ? 512 : 128));
  b.cross_entropy("loss", b.linear("head.out", x, 10), label_input(b));
  return b.finish();
}

// A sequential encoder reading a Fashion-MNIST image as 28 rows of 28 pixels.
graph::OpGraph transformer(const ModelSpec& s) {
  const std::int64_t hidden = paper(s) ? 1024 : 64, heads = paper(s) ? 16 : 4, ffn = 4 * hidden;
  const int layers = paper(s) ? 24 : 2;
  GraphBuilder b("transformer");
  OpId x = b.linear("embed", b.reshape("rows", image_input(b), {28, 28}), hidden);
  for (int l = 0; l < layers; ++l) x = encoder_layer(b, "layer" + std::to_string(l), x, heads, ffn);
  x = b.mean_seq("pool", b.layer_norm("ln_f", x));
  b.cross_entropy("loss", b.linear("head", x, 10), label_input(b));
  return b.finish();
}

constexpr std::int64_t kSyntheticClasses = 8;

graph::OpGraph mmt(const ModelSpec& s) {
  const int branches = paper(s) ? 4 : 2, layers = paper(s) ? 8 : 2;
  const std::int64_t seq = paper(s) ? 256 : 8, hidden = paper(s) ? 1024 : 32, heads = paper(s) ? 16 : 4;
  const std::int64_t ffn = paper(s) ? 4096 : 64, features = paper(s) ? 1024 : 16;
  GraphBuilder b("mmt");
  std::vector<OpId> pooled;
  for (int m = 0; m < branches; ++m) {
    const std::string p = "branch" + std::to_string(m);
    OpId x = b.input("modality" + std::to_string(m), {{seq, features}, DType::kFloat32});
    x = b.linear(at(p, "proj"), x, hidden);
    for (int l = 0; l < layers; ++l) x = encoder_layer(b, at(p, "layer" + std::to_string(l)), x, heads, ffn);
    pooled.push_back(b.mean_seq(at(p, "pool"), x));
  }
  OpId x = b.concat("concat", pooled, 0);
  x = b.activation("head.fc_relu", "relu", b.linear("head.fc", x, hidden));
  b.cross_entropy("loss", b.linear("head.out", x, kSyntheticClasses), label_input(b));
  return b.finish();
}

graph::OpGraph dlrm(const ModelSpec& s) {
  const int dense = paper(s) ? 7 : 2, sparse = paper(s) ? 7 : 2, layers = 4;
  const std::int64_t hidden = paper(s) ? 4096 : 32, features = paper(s) ? 512 : 16;
  const std::int64_t rows = paper(s) ? 1000000 : 100, dim = paper(s) ? 64 : 8, bag = paper(s) ? 100 : 4;
  GraphBuilder b("dlrm");
  std::vector<OpId> parts;
  for (int d = 0; d < dense; ++d) {
    OpId x = b.input("dense" + std::to_string(d), {{features}, DType::kFloat32});
    parts.push_back(feed_forward(b, "dense" + std::to_string(d), x, layers, hidden));
  }
  for (int e = 0; e < sparse; ++e) {
    OpId ids = b.input("sparse" + std::to_string(e), {{bag}, DType::kInt64}, rows);
    parts.push_back(b.embedding_bag("sparse" + std::to_string(e) + ".bag", ids, rows, dim));
  }
  OpId x = feed_forward(b, "top", b.concat("concat", parts, 0), 1, hidden);
  b.cross_entropy("loss", b.linear("top.out", x, kSyntheticClasses), label_input(b));
  return b.finish();
}

graph::OpGraph candle_uno(const ModelSpec& s) {
  const int branches = 7, layers = 4;
  const std::int64_t hidden = paper(s) ? 4096 : 32, features = paper(s) ? 1024 : 16;
  GraphBuilder b("candle_uno");
  std::vector<OpId> parts;
  for (int f = 0; f < (paper(s) ? branches : 3); ++f) {
    OpId x = b.input("feature" + std::to_string(f), {{features}, DType::kFloat32});
    parts.push_back(feed_forward(b, "branch" + std::to_string(f), x, layers, hidden));
  }
  OpId x = feed_forward(b, "merged", b.concat("concat", parts, 0), 2, hidden);
  b.cross_entropy("loss", b.linear("merged.out", x, kSyntheticClasses), label_input(b));
  return b.finish();
}

// A GPT-2-style causal language model: token and position embeddings
// (N(0, 0.02), as GPT-2's), pre-norm decoder blocks, a final norm, and the
// output head tied to the token embedding (one parameter, "tok.weight": a
// pipeline holds it on its first and last stage, see Note [Tied
// parameters]); a label per position (the next token; Note [Token losses]).
struct GptSize {
  std::int64_t vocab, context, hidden, heads;
  int layers;
};

GptSize gpt_size(const std::string& preset) {
  if (preset == "gpt2-124m") return {50257, 1024, 768, 12, 12};
  if (preset == "gpt2-350m") return {50257, 1024, 1024, 16, 24};
  if (preset == "gpt2-1.5b" || preset == "paper") return {50257, 1024, 1600, 25, 48};
  return {64, 32, 64, 4, 2};  // tiny
}

graph::OpGraph gpt(const ModelSpec& s) {
  const auto z = gpt_size(s.preset);
  GraphBuilder b("gpt");
  OpId x = b.embedding("tok", b.input("ids", {{z.context}, DType::kInt64}, z.vocab), z.vocab, z.hidden, 0.02);
  x = b.positional("pos", x, 0.02);
  for (int l = 0; l < z.layers; ++l) x = encoder_layer(b, "layer" + std::to_string(l), x, z.heads, 4 * z.hidden, true);
  x = b.unembed("head", b.layer_norm("ln_f", x), "tok.weight");
  b.cross_entropy("loss", x, b.input("label", {{z.context}, DType::kInt64}));
  return b.finish();
}

const std::map<std::string, std::function<graph::OpGraph(const ModelSpec&)>>& builders() {
  static const std::map<std::string, std::function<graph::OpGraph(const ModelSpec&)>> m = {
      {"mlp", mlp}, {"cnn", cnn}, {"inception", inception}, {"transformer", transformer},
      {"mmt", mmt}, {"dlrm", dlrm}, {"candle_uno", candle_uno}, {"gpt", gpt}};
  return m;
}

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp",  "cnn",        "inception", "transformer", "mmt",
                                                 "dlrm", "candle_uno", "gpt",       "gcn2",        "sage2",       "sage3",       "gat2",
                                                 "gcnii16", "gcnii64", "jk_gcn16",  "appnp",       "graph_mlp"};
  return names;
}

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = {"tiny", "paper", "gpt2-124m", "gpt2-350m", "gpt2-1.5b"};
  return names;
}

std::vector<std::string> presets_of(const std::string& model_name) {
  if (model_name == "gpt") return preset_names();
  return {"tiny", "paper"};
}

std::string default_dataset(const std::string& model_name) {
  if (is_gnn_model(model_name)) return "graph";
  if (model_name == "mmt" || model_name == "dlrm" || model_name == "candle_uno" || model_name == "gpt")
    return "synthetic";
  return "fashion-mnist";
}

graph::OpGraph read_model_file(const std::string& path) {
  const auto doc = read_json_file<graph::GraphError>(path, "model file (write one with tools/export)");
  try {
    return graph::OpGraph::from_json(doc);
  } catch (const graph::GraphError& e) {
    throw graph::GraphError("model file " + path + ": " + e.what());
  }
}

graph::OpGraph build_graph(const ModelSpec& spec) {
  if (!spec.file.empty()) return read_model_file(spec.file);
  auto it = builders().find(spec.name);
  if (it == builders().end() && !is_gnn_model(spec.name)) {
    throw graph::GraphError("model '" + spec.name + "' is unknown; allowed: " + join(model_names()) +
                            " (and gcniiN, jk_gcnN for a depth N up to 1024)");
  }
  const auto presets = presets_of(spec.name);
  if (std::find(presets.begin(), presets.end(), spec.preset) == presets.end()) {
    throw graph::GraphError("preset '" + spec.preset + "' is unknown for model '" + spec.name +
                            "'; allowed: " + join(presets));
  }
  if (it == builders().end()) return gnn_model(spec);
  return it->second(spec);
}

}  // namespace trident::zoo
