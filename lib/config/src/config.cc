#include "trident/config/config.h"
#include "trident/config/plan_request.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/cost/network.h"
#include "trident/gnn/graph_data.h"
#include "trident/formats/sources.h"
#include "trident/planner/planner.h"
#include "config_keys.h"
#include "key_table.h"

namespace trident::config {
namespace {

using namespace config_keys;

// --set dotted.key=value. Below a map key (parallel.sync) the rest of the
// path is one name, dots and all: --set parallel.sync.fc0.weight=sfb.
void apply_override(YAML::Node& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set '" + assignment + "': expected dotted.key=value, e.g. --set train.epochs=2");
  }
  const std::string key = assignment.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError("--set " + key + ": the value is not valid YAML (" + e.msg + ")");
  }
  std::vector<std::string> parts;
  for (const auto& k : keys()) {
    if (k.map && key.rfind(k.path + ".", 0) == 0) {
      parts = {section_of(k.path), k.path.substr(section_of(k.path).size() + 1), key.substr(k.path.size() + 1)};
      break;
    }
  }
  if (parts.empty()) {
    std::size_t start = 0;
    for (std::size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1)
      parts.push_back(key.substr(start, dot - start));
    parts.push_back(key.substr(start));
  }
  YAML::Node node;
  node.reset(root);
  std::string walked;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + parts[i];
    if (node[parts[i]] && !node[parts[i]].IsMap()) throw ConfigError("--set " + key + ": '" + walked + "' is not a section");
    YAML::Node child = node[parts[i]];
    node.reset(child);
  }
  if (value.IsNull()) {
    node.remove(parts.back());  // --set key=null removes the key (docs/config.md)
    return;
  }
  node[parts.back()] = value;
}

void check_fashion_mnist_files(const Reader& r, const std::string& dir) {
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"}) {
    if (!std::filesystem::exists(std::filesystem::path(dir) / f)) {
      r.fail("data.path", YAML::Node(dir),
             std::string("missing ") + f + " (install Debian package dataset-fashion-mnist: make deps)");
    }
  }
}

// data.train and data.test hold FIELD.npy for every input field of the
// model (and label.npy); their contents are checked when loaded.
void check_npy_files(const Reader& r, const YAML::Node& root, const TrainConfig& c, const graph::OpGraph& graph) {
  for (const auto& [key, dir] : {std::pair{"train", c.data.train}, std::pair{"test", c.data.test}}) {
    const auto node = root["data"][key];
    if (dir.empty()) r.fail(std::string("data.name = npy needs data.") + key + ": a directory of FIELD.npy files");
    if (!std::filesystem::is_directory(dir)) r.fail(std::string("data.") + key, node, "no such directory");
    for (const auto& op : graph.ops()) {
      if (!op.is_input()) continue;
      const auto file = std::filesystem::path(dir) / (op.attrs.value("field", op.name) + ".npy");
      if (!std::filesystem::exists(file))
        r.fail(std::string("data.") + key, node,
               "missing " + file.filename().string() + " for the model's input '" + op.name + "' (" +
                   graph::to_string(op.output) + " per sample; numpy.save writes one)");
    }
  }
}

// data.train and data.test name .npy files of token ids for a model with a
// loss per position; their contents are checked when loaded (data/tokens.h).
void check_token_files(const Reader& r, const YAML::Node& root, const TrainConfig& c, const graph::OpGraph& graph) {
  const auto& loss = graph.op(graph.loss());
  if (!graph::OpGraph::per_token(loss))
    r.fail("data.name", root["data"]["name"] ? root["data"]["name"] : YAML::Node(c.data.name),
           "token files train a model with a label per position (e.g. model.name=gpt); model '" + graph.name() +
               "' has " + graph::to_string(loss.inputs.at(1).expected) + " labels");
  for (const auto& [key, file] : {std::pair{"train", c.data.train}, std::pair{"test", c.data.test}}) {
    const auto node = root["data"][key];
    if (file.empty())
      r.fail(std::string("data.name = tokens needs data.") + key + ": an .npy of int64 token ids [N, T+1], or a "
             "token file .bin");
    if (!std::filesystem::is_regular_file(file)) r.fail(std::string("data.") + key, node, "no such file");
  }
}

// data.train and data.test name image folders or tar shard patterns, for a
// model with one float image input [C, H, W] (C 1 or 3); their samples are
// indexed when loaded (formats/sample_index.h).
void check_image_data(const Reader& r, const YAML::Node& root, const TrainConfig& c, const graph::OpGraph& graph) {
  const auto name = root["data"]["name"] ? root["data"]["name"] : YAML::Node(c.data.name);
  for (const auto& [key, where] : {std::pair{"train", c.data.train}, std::pair{"test", c.data.test}}) {
    if (where.empty())
      r.fail(std::string("data.name = ") + c.data.name + " needs data." + key + ": " +
             (c.data.name == "images" ? "an image folder ROOT/<class>/<image>" : "shards, e.g. train-{000000..000099}.tar"));
    if (c.data.name == "images" && !std::filesystem::is_directory(where))
      r.fail(std::string("data.") + key, root["data"][key], "no such directory");
  }
  int images = 0;
  for (const auto& op : graph.ops()) {
    if (!op.is_input() || op.attrs.value("field", op.name) == "label") continue;
    const auto& shape = op.output.shape;
    if (op.output.dtype != graph::DType::kFloat32 || shape.size() != 3 || (shape[0] != 1 && shape[0] != 3))
      r.fail("data.name", name, "images train a model whose inputs are one image, float32 [1 or 3, H, W]; model '" +
                                    graph.name() + "' reads '" + op.name + "' " + graph::to_string(op.output));
    ++images;
  }
  if (images != 1) r.fail("data.name", name, "images train a model with one image input; model '" + graph.name() + "' has " + std::to_string(images));
  if (!graph::OpGraph::classifies(graph.op(graph.loss()).kind) || graph::OpGraph::per_token(graph.op(graph.loss())))
    r.fail("data.name", name, "image folders and shards give class ids; model '" + graph.name() + "' has loss " +
                                  graph.op(graph.loss()).kind);
  if (c.data.on_bad_sample == "skip" && c.parallel.devices > 1 && c.parallel.partitioner != "dp")
    r.fail("data.on_bad_sample", root["data"]["on_bad_sample"],
           "`skip` replaces a bad sample's image and label together, which a pipeline whose labels and images lie "
           "in different stages cannot; use `error`, or data parallelism (parallel.partitioner: dp)");
}

// The model's graph; a GNN's bad graph names model.graph.
graph::OpGraph build_model_graph(const Reader& r, const YAML::Node& root, const TrainConfig& c) {
  try {
    return zoo::build_graph(c.model);
  } catch (const gnn::GraphDataError& e) {
    r.fail("model.graph", root["model"]["graph"] ? root["model"]["graph"] : YAML::Node("csbm"), e.what());
  }
}

// GNNPipe mode (Note [Node chunks] in nn/node_chunks.h): every chunk once a
// step, through a layer split.
void check_graph_chunks(const Reader& r, const YAML::Node& root, const TrainConfig& c) {
  const auto k = c.model.graph_chunks;
  if (k < 2) return;
  if (c.train.mini_batch != k)
    r.fail("train.mini_batch", root["train"]["mini_batch"],
           "GNNPipe mode trains every chunk once a step: must be model.graph_chunks = " + std::to_string(k));
  if (c.parallel.partitioner == "graph")
    r.fail("parallel.partitioner", root["parallel"]["partitioner"],
           "`graph` partitions the whole graph's nodes among devices (exact); GNNPipe mode (model.graph_chunks = " +
               std::to_string(k) + ") pipelines chunks through layer stages: use graphpipe or a plan file");
}

// Sampled training (Note [Sampled blocks] in nn/sampled_blocks.h): one
// fan-out per layer, data parallel, not with GNNPipe's chunks.
void check_fanouts(const Reader& r, const YAML::Node& root, const TrainConfig& c) {
  if (c.model.node_embedding > 0 && c.model.fanouts.empty())
    r.fail("model.node_embedding", root["model"]["node_embedding"],
           "learnable node embeddings train on sampled mini-batches: set model.fanouts too");
  if (c.model.fanouts.empty()) return;
  const int layers = zoo::sampled_layers(c.model.name);
  const auto& node = root["model"]["fanouts"];
  if (!layers)
    r.fail("model.fanouts", node, "sampled training is built for gcn2, sageN and gat2; '" + c.model.name +
                                      "' trains on the whole graph (remove model.fanouts)");
  if (static_cast<int>(c.model.fanouts.size()) != layers)
    r.fail("model.fanouts", node, "one fan-out per layer: '" + c.model.name + "' has " + std::to_string(layers) +
                                      " layers, so " + std::to_string(layers) + " fan-outs, the input layer first");
  if (c.model.graph_chunks > 1)
    r.fail("model.graph_chunks", root["model"]["graph_chunks"],
           "GNNPipe's chunks and sampled mini-batches (model.fanouts) do not combine: set one");
  if (c.parallel.partitioner != "dp")
    r.fail("parallel.partitioner", root["parallel"]["partitioner"] ? root["parallel"]["partitioner"] : YAML::Node(c.parallel.partitioner),
           "sampled training (model.fanouts) runs data parallel over seed nodes: `dp`");
}

// The dataset exists, has the fields the model reads, and fits in memory.
void check_data(const Reader& r, const YAML::Node& root, const TrainConfig& c) {
  const bool gnn = zoo::is_gnn_model(c.model.name) && c.model.file.empty();
  if (c.data.name == "graph" && !gnn)
    r.fail("data.name", root["data"]["name"], "graph data trains the zoo's graph neural networks (gcn2, sage2, "
           "gcniiN, jk_gcnN, appnp, graph_mlp), not '" + c.model.name + "'");
  if (gnn && c.data.name != "graph")
    r.fail("data.name", root["data"]["name"] ? root["data"]["name"] : YAML::Node(c.data.name),
           "a graph neural network trains on `graph` (its model.graph)");
  if (c.model.graph_chunks > 1 && !gnn)
    r.fail("model.graph_chunks", root["model"]["graph_chunks"],
           "GNNPipe mode chunks a graph's nodes: it applies to the zoo's graph neural networks, not '" + c.model.name + "'");
  check_fanouts(r, root, c);
  const auto graph = build_model_graph(r, root, c);
  if (gnn) return check_graph_chunks(r, root, c);
  if (fashion(c)) {
    for (const auto& op : graph.ops()) {
      const std::string field = op.attrs.value("field", "");
      if (op.is_input() && field != "image" && field != "label")
        r.fail("data.name", root["data"]["name"] ? root["data"]["name"] : YAML::Node(c.data.name),
               "model '" + c.model.name + "' reads field '" + field + "', which fashion-mnist lacks; use synthetic");
    }
    check_fashion_mnist_files(r, c.data.path);
    return;
  }
  if (c.data.name == "npy") return check_npy_files(r, root, c, graph);
  if (c.data.name == "tokens") return check_token_files(r, root, c, graph);
  if (c.data.name == "images" || c.data.name == "tar") return check_image_data(r, root, c, graph);
  constexpr std::int64_t kMaxBytes = std::int64_t{4} << 30;
  const auto per_sample = graph.input_bytes(), samples = c.data.train_size + c.data.test_size;
  if (per_sample > 0 && samples > kMaxBytes / per_sample)  // no product that could overflow
    r.fail("data.train_size", YAML::Node(c.data.train_size),
           "synthetic data for " + c.model.name + "/" + c.model.preset + " would take " +
               std::to_string(std::llround(static_cast<double>(per_sample) * static_cast<double>(samples) / (1 << 20))) +
               " MiB; lower data.train_size/test_size to fit " + std::to_string(kMaxBytes >> 20) + " MiB");
}

// Checks that relate several keys, after every key is read.
// The keys of the training recipe that depend on others.
void check_recipe(const Reader& r, const YAML::Node& root, const TrainConfig& c, std::optional<PartitionerKind> kind) {
  if (c.optimizer.schedule == "step" && !c.optimizer.step_size)
    r.fail("optimizer.schedule", root["optimizer"]["schedule"],
           "needs optimizer.step_size: the rate is multiplied by optimizer.gamma every step_size steps");
  if (c.optimizer.clip_norm > 0 && c.parallel.devices > 1 && c.parallel.staleness > 0)
    r.fail("optimizer.clip_norm", root["optimizer"]["clip_norm"],
           "needs every replica's gradients of one step; use parallel.staleness=0 (BSP) to clip");
  if (c.parallel.comm_dtype != "fp32" && c.parallel.devices > 1 && c.parallel.grad_sync != "ps" &&
      c.parallel.grad_sync != "hybrid")
    r.fail("parallel.comm_dtype", root["parallel"]["comm_dtype"],
           "applies to the parameter server's pushes; use parallel.grad_sync=ps (or hybrid), or comm_dtype fp32 "
           "(Gloo's all-reduce in LibTorch 1.13 has no bf16)");
  const auto k = c.train.accumulate;
  if (k == 1) return;
  const YAML::Node& given = root["train"]["accumulate"];
  if (c.parallel.devices > 1 && kind != PartitionerKind::kDataParallel)
    r.fail("train.accumulate", given,
           "applies to data parallelism (parallel.partitioner=dp); a pipeline accumulates over its micro-batches "
           "already (parallel.micro_batch)");
  if (c.parallel.micro_batch)
    r.fail("train.accumulate", given, "give train.accumulate or parallel.micro_batch, not both");
  if (c.train.mini_batch % k)
    r.fail("train.accumulate", given, "must divide train.mini_batch = " + std::to_string(c.train.mini_batch));
  if ((c.train.mini_batch / k) % c.parallel.devices)
    r.fail("train.accumulate", given,
           "train.mini_batch / accumulate = " + std::to_string(c.train.mini_batch / k) +
               " must split evenly among parallel.devices = " + std::to_string(c.parallel.devices));
}

// See Note [Delayed pipelines] in schedule/delayed.h: one asynchrony at a
// time, on models whose steps are independent of each other's data.
void check_delay(const Reader& r, const YAML::Node& root, const TrainConfig& c) {
  if (!c.parallel.pipeline_delay) return;
  const YAML::Node& given = root["parallel"]["pipeline_delay"];
  if (c.parallel.staleness > 0)
    r.fail("parallel.pipeline_delay", given, "cannot combine with parallel.staleness > 0 (two asynchronies); set one");
  if (c.parallel.schedule != "auto" && c.parallel.schedule != "1f1b" && c.parallel.schedule != "graph-1f1b" &&
      c.parallel.schedule != "gpipe")
    r.fail("parallel.pipeline_delay", given,
           "runs 1F1B's lists; parallel.schedule = " + c.parallel.schedule + " is not one (use 1f1b, graph-1f1b or auto)");
  if (!c.model.fanouts.empty() || c.model.graph_chunks || !c.model.graph.empty())
    r.fail("parallel.pipeline_delay", given, "applies to models of independent samples, not graph models (model.graph)");
  if (c.optimizer.clip_norm > 0)
    r.fail("parallel.pipeline_delay", given,
           "cannot clip (optimizer.clip_norm): a stage updates when its own backwards are done, without the "
           "other stages' gradients; set clip_norm 0");
}

void check_relations(const Reader& r, const YAML::Node& root, TrainConfig& c) {
  if (!std::regex_match(c.name, std::regex("[A-Za-z0-9._-]+")))
    r.fail("name", root["name"], "must be letters, digits, '.', '_' or '-' (it names the run directory)");
  check_data(r, root, c);
  if (c.train.epochs && c.train.steps)
    r.fail("train.steps", root["train"]["steps"], "give either train.epochs or train.steps, not both");
  if (!c.train.epochs && !c.train.steps) c.train.epochs = 1;
  const auto& p = c.parallel.partitioner;
  const auto kind = partitioner_kind(p);  // See Note [Config to request]
  if (!kind)
    r.fail("parallel.partitioner", root["parallel"]["partitioner"],
           "allowed: " + join(planner::partitioner_names()) + ", or a plan .json path");
  if (c.parallel.micro_batch && c.train.mini_batch % c.parallel.micro_batch)
    r.fail("parallel.micro_batch", root["parallel"]["micro_batch"],
           "must divide train.mini_batch = " + std::to_string(c.train.mini_batch));
  check_recipe(r, root, c, kind);
  if (const auto k = c.parallel.micro_batch_ratio; k & (k - 1))
    r.fail("parallel.micro_batch_ratio", root["parallel"]["micro_batch_ratio"],
           "allowed: a power of two (1: one micro-batch size for every stage; 0: the planner's default)");
  if (c.parallel.devices > 1 && c.parallel.partitioner == "dp" && c.train.mini_batch % c.parallel.devices)
    r.fail("parallel.devices", root["parallel"]["devices"],
           "must divide train.mini_batch = " + std::to_string(c.train.mini_batch) +
               " (each process takes an equal slice of every batch)");
  else if (c.parallel.devices > 1 && c.parallel.partitioner == "dp" && c.parallel.micro_batch &&
           c.parallel.micro_batch % c.parallel.devices)
    r.fail("parallel.micro_batch", root["parallel"]["micro_batch"],
           "must split evenly among parallel.devices = " + std::to_string(c.parallel.devices) +
               " under dp (each process takes an equal slice of every micro-batch)");
  if (c.parallel.devices > 1 && c.parallel.staleness > 0 && c.parallel.grad_sync != "ps" &&
      c.parallel.grad_sync != "hybrid")
    r.fail("parallel.staleness", root["parallel"]["staleness"],
           "applies to the parameter server; use parallel.grad_sync=ps (or hybrid), or staleness 0");
  // See Note [Staleness]: members run ahead of each other only as data-parallel
  // replicas; a pipeline's stages exchange every micro-batch in lock-step.
  if (c.parallel.devices > 1 && c.parallel.staleness > 0 && kind == PartitionerKind::kSearch)
    r.fail("parallel.staleness", root["parallel"]["staleness"],
           "applies to data-parallel replicas; use parallel.partitioner=dp (now " + p + "), or staleness 0");
  check_delay(r, root, c);
}

// The sections and keys of `root` after `overrides`, every value and relation checked.
TrainConfig read_config(YAML::Node& root, const std::vector<std::string>& overrides, const std::string& source) {
  for (const auto& o : overrides) apply_override(root, o);
  Reader r(source, root);
  std::map<std::string, YAML::Node> section;
  for (const auto& s : sections()) section[s] = r.section(s, allowed_in(s));
  const auto& m = section["model"];
  if (!m["name"] && !m["file"])
    r.fail("missing key 'model.name' (" + join(zoo::model_names()) + ") or 'model.file' (your own model, see "
           "docs/own-model.md)");
  if (m["name"] && m["file"]) r.fail("model.file", m["file"], "give model.name or model.file, not both");
  if (m["weights"] && !m["file"]) r.fail("model.weights", m["weights"], "needs model.file (zoo models are seeded)");
  TrainConfig c;
  for (const auto& k : keys()) k.read(r, section[section_of(k.path)], c);
  check_relations(r, root, c);
  return c;
}

}  // namespace

TrainConfig parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                         const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ": not valid YAML at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())  // found by fuzz_config: --set then indexed a scalar
    throw ConfigError(source + ": must be a mapping of sections (model:, data:, train:, ...), not " +
                      (root.IsSequence() ? "a list" : "'" + root.Scalar() + "'"));
  try {
    return read_config(root, overrides, source);
  } catch (const YAML::Exception& e) {  // a value of a kind no check foresaw: still one line naming the place
    throw ConfigError(source + ": line " + std::to_string(e.mark.line + 1) + ", column " +
                      std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

std::string config_key_table() {
  std::string s = "| key | default | allowed |\n|---|---|---|\n";
  for (const auto& k : keys()) s += "| `" + k.path + "` | " + k.fallback + " | " + k.allowed + " |\n";
  return s;
}

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  auto c = parse_config(read_text_file<ConfigError>(path, "--config"), overrides, path);
  // A relative plan path is looked up beside the config file first.
  auto& plan = c.parallel.partitioner;
  if (partitioner_kind(plan) == PartitionerKind::kPlanFile && std::filesystem::path(plan).is_relative()) {
    const auto beside = std::filesystem::path(path).parent_path() / plan;
    if (!std::filesystem::exists(plan) && std::filesystem::exists(beside)) plan = beside.string();
  }
  return c;
}

std::string TrainConfig::to_yaml() const {
  YAML::Emitter e;
  e << YAML::BeginMap;
  for (const auto& section : sections()) {
    if (!section.empty()) e << YAML::Key << section << YAML::Value << YAML::BeginMap;
    for (const auto& k : keys()) {
      if (section_of(k.path) != section) continue;
      YAML::Emitter value;
      k.write(value, *this);
      if (value.size() == 0) continue;  // omitted (e.g. train.steps when epochs are given)
      e << YAML::Key << (section.empty() ? k.path : k.path.substr(section.size() + 1)) << YAML::Value;
      k.write(e, *this);
    }
    if (!section.empty()) e << YAML::EndMap;
  }
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace trident::config
