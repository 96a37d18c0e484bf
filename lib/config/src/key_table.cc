// Every key of the training config, with its default, range and allowed
// values (see Note [Config keys] in config_keys.h); the checks across keys
// and the reading itself are in config.cc.
#include "key_table.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "trident/base/text.h"
#include "trident/images/transforms.h"
#include "trident/config/plan_request.h"
#include "trident/formats/sources.h"
#include "trident/cost/network.h"
#include "trident/planner/planner.h"
#include "trident/zoo/zoo.h"

namespace trident::config::config_keys {

bool fashion(const TrainConfig& c) { return c.data.name == "fashion-mnist"; }

namespace {

// parallel.sync: parameter name -> method.
Key sync_key() {
  Key k{"parallel.sync", "—",
        "per-parameter overrides of the sync method, e.g. `{fc0.weight: sfb, head.bias: ps}`; on the command line "
        "`--set parallel.sync.fc0.weight=sfb`"};
  k.map = true;
  k.read = [](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    const auto& node = sec["sync"];
    if (!node || node.IsNull()) return;
    const auto& methods = cost::sync_method_names();
    if (!node.IsMap()) r.fail("parallel.sync", node, "must map parameter names to " + join(methods));
    for (const auto& kv : node) {
      const auto method = kv.second.IsScalar() ? kv.second.Scalar() : std::string();
      if (std::find(methods.begin(), methods.end(), method) == methods.end())
        r.fail("parallel.sync." + kv.first.Scalar(), kv.second, "allowed: " + join(methods));
      c.parallel.sync[kv.first.Scalar()] = method;
    }
  };
  k.write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (c.parallel.sync.empty()) return;
    e << YAML::BeginMap;
    for (const auto& [name, method] : c.parallel.sync) e << YAML::Key << name << YAML::Value << method;
    e << YAML::EndMap;
  };
  return k;
}

constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::int64_t kFashionMnistTrain = 60000, kFashionMnistTest = 10000;
constexpr std::int64_t kSyntheticTrain = 8192, kSyntheticTest = 1024, kMostSyntheticSamples = 100000000;
constexpr std::int64_t kMostDevices = 4096, kMostThreads = 1024, kMostStaleness = 1000;


// A zoo model's own dataset; for a model file, Fashion-MNIST when it reads
// just its fields, else synthetic data.
std::string default_dataset(const TrainConfig& c) {
  if (c.model.file.empty()) return zoo::default_dataset(c.model.name);
  const auto g = zoo::read_model_file(c.model.file);
  for (const auto& op : g.ops()) {
    if (!op.is_input()) continue;
    const auto field = op.attrs.value("field", op.name);
    if (!(field == "label" || (field == "image" && op.output == graph::TensorSpec{{1, 28, 28}, graph::DType::kFloat32})))
      return "synthetic";
  }
  return "fashion-mnist";
}

// model.file: a user's model (docs/own-model.md). Reading it names the
// model, so every later default (the run's name, the dataset's checks) sees
// the graph's own name.
Key model_file_key() {
  auto k = text_key("model.file", [](TrainConfig& c) -> auto& { return c.model.file; }, {},
                    "a model.json written by `tools/export` (instead of `model.name`)", {nullptr, "none"});
  k.read = [read = k.read](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    read(r, sec, c);
    if (c.model.file.empty()) return;
    try {
      c.model.name = zoo::read_model_file(c.model.file).name();
    } catch (const std::exception& e) {
      r.fail("model.file", sec["file"], first_line(e));
    }
  };
  k.write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (!c.model.file.empty()) e << c.model.file;
  };
  return k;
}

// model.fanouts: a list ([15, 10, 5]) or its text ("15,10,5"), one fan-out
// per layer (input layer first), each >= 1 or -1 (every neighbour).
Key fanouts_key() {
  Key k{"model.fanouts", "none: full-graph training",
        "graph neural networks (gcn2, sageN, gat2): sampled mini-batch training with this many sampled "
        "neighbours per layer, the input layer first, -1 for every neighbour; one per layer (docs/gnn.md)"};
  k.read = [](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    const auto& node = sec["fanouts"];
    if (!node || node.IsNull()) return;
    std::vector<std::string> items;
    if (node.IsSequence()) {
      for (const auto& v : node) {
        if (!v.IsScalar()) r.fail("model.fanouts", node, "a list of integers, each >= 1 or -1");
        items.push_back(v.Scalar());
      }
    } else if (node.IsScalar()) {
      std::string item;
      for (char ch : node.Scalar() + ",")
        if (ch == ',') items.push_back(item), item.clear();
        else if (ch != ' ') item += ch;
    }
    if (items.empty()) r.fail("model.fanouts", node, "a list of integers, each >= 1 or -1, one per layer");
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::int64_t v = 0;
      if (!YAML::convert<std::int64_t>::decode(YAML::Node(items[i]), v) || v == 0 || v < -1 || v > (1 << 30))
        r.fail("model.fanouts", node, "fan-out " + std::to_string(i) + " is '" + items[i] +
                                          "': each is an integer >= 1, or -1 for every neighbour");
      c.model.fanouts.push_back(static_cast<int>(v));
    }
  };
  k.write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (c.model.fanouts.empty()) return;
    e << YAML::Flow << YAML::BeginSeq;
    for (int v : c.model.fanouts) e << v;
    e << YAML::EndSeq;
  };
  return k;
}

// The model, and the run's name and directory (which default from it).
std::vector<Key> model_keys() {
  std::vector<Key> k;
  k.push_back(text_key("model.name", [](TrainConfig& c) -> auto& { return c.model.name; }, {},
                       shown(join(zoo::model_names(), "`, `")) + ", `gcniiN` and `jk_gcnN` (a depth N up to 1024), "
                       "`sageN` (up to 16), or give `model.file`", {nullptr, "(required)"}));
  k.back().read = [](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    c.model.name = r.str(sec, "model.name", "");
    const auto& names = zoo::model_names();
    if (!c.model.name.empty() && !zoo::is_gnn_model(c.model.name) &&
        std::find(names.begin(), names.end(), c.model.name) == names.end())
      r.fail("model.name", sec["name"], "allowed: " + join(names) + ", gcniiN, jk_gcnN (N up to 1024), sageN (N up to 16)");
  };
  k.push_back(text_key("model.graph", [](TrainConfig& c) -> auto& { return c.model.graph; }, {},
                       "graph neural networks: the graph, a directory of .npy files or `csbm[:key=value,...]` "
                       "(docs/gnn.md)", {nullptr, "`csbm`"}));
  k[k.size() - 2].write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (c.model.file.empty()) e << c.model.name;  // a model file names the model itself
  };
  k.back().write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (!c.model.graph.empty()) e << c.model.graph;
  };
  k.push_back(int_key("model.graph_chunks", [](TrainConfig& c) -> auto& { return c.model.graph_chunks; }, bound(0),
                      bound(kNoLimit),
                      "graph neural networks: 0 (exact: the whole graph is one sample), or 2 up to the graph's nodes: "
                      "GNNPipe mode, the nodes split into this many chunks that pipeline through the layer stages as "
                      "micro-batches, reading neighbours in other chunks up to one epoch stale — not equal to one "
                      "process (docs/gnn.md)",
                      {nullptr, "0"}, true));
  k.push_back(fanouts_key());
  k.push_back(bool_key("model.sample_replace", [](TrainConfig& c) -> auto& { return c.model.sample_replace; },
                       "with `model.fanouts`: sample neighbours with replacement (`true`) or without"));
  k.push_back(int_key("model.node_embedding", [](TrainConfig& c) -> auto& { return c.model.node_embedding; }, bound(0),
                      bound(1 << 16),
                      "with `model.fanouts`: a learnable embedding of this width per node beside its features, rows "
                      "held by their owners and updated there by sparse Adagrad (docs/gnn.md); 0: none",
                      {nullptr, "0"}, true));
  k.push_back(int_key("model.hidden", [](TrainConfig& c) -> auto& { return c.model.hidden; }, bound(0), bound(1 << 20),
                      "graph neural networks: the hidden width (GAT: per head); 0: the preset's (16 tiny, 64 paper; "
                      "GAT 8)", {nullptr, "0"}, true));
  k.push_back(text_key("model.preset", [](TrainConfig& c) -> auto& { return c.model.preset; }, zoo::preset_names(),
                       shown(join(zoo::preset_names(), "`, `"))));
  k.push_back(model_file_key());
  k.push_back(text_key("model.weights", [](TrainConfig& c) -> auto& { return c.model.weights; }, {},
                       "with `model.file`: the initial weights `tools/export` wrote (a torch.save file)",
                       {nullptr, "none: seeded from `train.seed`"}));
  k.back().write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (!c.model.weights.empty()) e << c.model.weights;
  };
  k.push_back(text_key("name", [](TrainConfig& c) -> auto& { return c.name; }, {},
                       "letters, digits, `.`, `_`, `-`; names `runs/<name>/`",
                       {[](const TrainConfig& c) { return c.model.file.empty() ? c.model.name + "-" + c.model.preset : c.model.name; },
                        "`<model>-<preset>`, or a model file's name"}));
  k.push_back(text_key("runs_dir", [](TrainConfig& c) -> auto& { return c.runs_dir; }, {}, "a directory"));
  return k;
}

// A YAML value as JSON: scalars become integers, numbers or booleans when
// they read as one, else strings.
nlohmann::json json_of(const YAML::Node& n) {
  if (n.IsSequence()) {
    auto a = nlohmann::json::array();
    for (const auto& e : n) a.push_back(json_of(e));
    return a;
  }
  if (n.IsMap()) {
    auto o = nlohmann::json::object();
    for (const auto& kv : n) o[kv.first.Scalar()] = json_of(kv.second);
    return o;
  }
  if (!n.IsScalar()) return nullptr;
  std::int64_t i;
  double d;
  bool b;
  if (YAML::convert<std::int64_t>::decode(n, i)) return i;
  if (YAML::convert<double>::decode(n, d)) return d;
  if (n.Tag() != "!" && YAML::convert<bool>::decode(n, b)) return b;
  return n.Scalar();
}

// data.transforms, data.eval_transforms: a list checked by images::parse_transforms, kept as JSON text.
Key transforms_key(std::string path, Ref<std::string> ref, std::string allowed, std::string fallback) {
  Key k{path, std::move(fallback), std::move(allowed)};
  k.read = [path, ref](const Reader& r, const YAML::Node& sec, TrainConfig& c) {
    const auto& node = sec[path.substr(path.rfind('.') + 1)];
    if (!node || node.IsNull()) return;
    const auto list = json_of(node);
    try {
      images::parse_transforms(list, path);
    } catch (const images::TransformError& e) {
      r.fail(e.what());
    }
    ref(c) = list.dump();
  };
  k.write = [ref](YAML::Emitter& e, const TrainConfig& c) {
    const auto& text = ref(const_cast<TrainConfig&>(c));
    if (!text.empty()) e << YAML::Flow << YAML::Load(text);
  };
  return k;
}

std::vector<Key> data_keys() {
  std::vector<Key> k;
  k.push_back(text_key("data.name", [](TrainConfig& c) -> auto& { return c.data.name; },
                       {"fashion-mnist", "synthetic", "npy", "tokens", "images", "tar", "graph"},
                       "`fashion-mnist`, `synthetic`, `npy` (your arrays), `tokens` (token ids for a language "
                       "model), `images` (image folders), `tar` (WebDataset shards), `graph` (`model.graph`'s nodes)",
                       {default_dataset, "`fashion-mnist` for mlp/cnn/inception/transformer and model files that "
                                         "read only `image` [1,28,28] and `label`, `graph` for graph neural "
                                         "networks, else `synthetic`"}));
  k.push_back(text_key("data.eval", [](TrainConfig& c) -> auto& { return c.data.eval; }, {"test", "val"},
                       "graph: the mask evaluation reads, `test` or `val`", {nullptr, "`test`"}));
  k.back().write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (c.data.eval != "test") e << c.data.eval;
  };
  k.push_back(text_key("data.train", [](TrainConfig& c) -> auto& { return c.data.train; }, {},
                       "npy: a directory with FIELD.npy for every input field and label.npy; tokens: an .npy "
                       "of int64 token ids [N, T+1] (ids, then the next token), or a token file `.bin` (nanoGPT's "
                       "uint16 ids, or Megatron's beside its `.idx`); images: a folder ROOT/<class>/<image>; tar: "
                       "shards, e.g. `train-{000000..000099}.tar`", {nullptr, "—"}));
  k.back().write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (!c.data.train.empty()) e << c.data.train;
  };
  k.push_back(text_key("data.test", [](TrainConfig& c) -> auto& { return c.data.test; }, {},
                       "npy, tokens, images, tar: the same for the test split", {nullptr, "—"}));
  k.back().write = [](YAML::Emitter& e, const TrainConfig& c) {
    if (!c.data.test.empty()) e << c.data.test;
  };
  k.push_back(text_key("data.path", [](TrainConfig& c) -> auto& { return c.data.path; }, {},
                       "directory with the four IDX `.gz` files",
                       {[](const TrainConfig&) { return std::string(formats::kFashionMnistDir); },
                        shown(std::string(formats::kFashionMnistDir))}));
  const auto size_key = [](const char* path, Ref<std::int64_t> ref, std::int64_t fm, std::int64_t synthetic) {
    return int_key(path, ref, [](const TrainConfig& c) -> std::int64_t { return fashion(c) ? 0 : 1; },
                   [fm](const TrainConfig& c) { return fashion(c) ? fm : kMostSyntheticSamples; },
                   "fashion-mnist: 0 (all) to " + std::to_string(fm) + "; synthetic: ≥ 1, at most 4 GiB of data",
                   {[synthetic](const TrainConfig& c) { return fashion(c) ? std::int64_t{0} : synthetic; },
                    "all " + std::to_string(fm) + " (fashion-mnist), " + std::to_string(synthetic) + " (synthetic)"});
  };
  k.push_back(size_key("data.train_size", [](TrainConfig& c) -> auto& { return c.data.train_size; },
                       kFashionMnistTrain, kSyntheticTrain));
  k.push_back(size_key("data.test_size", [](TrainConfig& c) -> auto& { return c.data.test_size; }, kFashionMnistTest,
                       kSyntheticTest));
  k.push_back(transforms_key("data.transforms", [](TrainConfig& c) -> auto& { return c.data.transforms; },
                             "images, tar: the training transforms, a list of `random_resized_crop`, "
                             "`horizontal_flip`, `resize`, `center_crop`, `normalize` (docs/data.md)",
                             "`[random_resized_crop: <input size>, horizontal_flip, normalize: imagenet]` (grey: "
                             "`{mean: [0.5], std: [0.5]}`)"));
  k.push_back(transforms_key("data.eval_transforms", [](TrainConfig& c) -> auto& { return c.data.eval_transforms; },
                             "images, tar: the evaluation transforms (no random ones)",
                             "`[resize: <input size / 0.875>, center_crop: <input size>, normalize: imagenet]`"));
  k.push_back(int_key("data.workers", [](TrainConfig& c) -> auto& { return c.data.workers; }, bound(0), bound(256),
                      "0 (automatic: half this process's threads, at least 1, for images and tar; none for data "
                      "held in memory) to 256 decoding threads per process"));
  k.push_back(int_key("data.prefetch", [](TrainConfig& c) -> auto& { return c.data.prefetch; }, bound(1), bound(64),
                      "1 to 64 steps read ahead of training"));
  k.push_back(text_key("data.on_bad_sample", [](TrainConfig& c) -> auto& { return c.data.on_bad_sample; },
                       {"error", "skip"},
                       "`error` (stop with exit 2 naming the file and sample), `skip` (replace it by the next good "
                       "sample, counted in metrics.jsonl and listed at the end)"));
  return k;
}

std::vector<Key> train_keys() {
  std::vector<Key> k;
  k.push_back(int_key("train.epochs", [](TrainConfig& c) -> auto& { return c.train.epochs; }, bound(1),
                      bound(kNoLimit), "≥ 1; not together with `steps`", {nullptr, "1 (when `steps` is not given)"},
                      true));
  k.push_back(int_key("train.steps", [](TrainConfig& c) -> auto& { return c.train.steps; }, bound(1), bound(kNoLimit),
                      "≥ 1", {nullptr, "—"}, true));
  k.push_back(int_key("train.mini_batch", [](TrainConfig& c) -> auto& { return c.train.mini_batch; }, bound(1),
                      [](const TrainConfig& c) {
                        if (c.data.name == "npy" || c.data.name == "tokens" || c.data.name == "images" ||
                            c.data.name == "tar")
                          return kNoLimit;  // the arrays' length, checked when loaded
                        if (c.data.name == "graph" && zoo::is_gnn_model(c.model.name) && c.model.fanouts.empty())
                          return std::max<std::int64_t>(1, c.model.graph_chunks);  // one graph, or its chunks
                        return fashion(c) ? (c.data.train_size ? c.data.train_size : kFashionMnistTrain)
                                          : c.data.train_size;
                      },
                      "1 to the training-set size (a graph: 1, the whole graph; `model.graph_chunks` in GNNPipe mode; "
                      "seed nodes under `model.fanouts`)",
                      {[](const TrainConfig& c) {
                         return c.data.name == "graph" && c.model.fanouts.empty()
                                    ? std::max<std::int64_t>(1, c.model.graph_chunks) : std::int64_t{128};
                       },
                       "128; 1 for a graph (`model.graph_chunks` in GNNPipe mode; 128 seed nodes under `model.fanouts`)"}));
  k.push_back(int_key("train.accumulate", [](TrainConfig& c) -> auto& { return c.train.accumulate; }, bound(1),
                      [](const TrainConfig& c) { return c.train.mini_batch; },
                      "divides `mini_batch`; data parallelism: each optimizer step runs `mini_batch / accumulate` "
                      "samples at a time, `accumulate` times, syncing gradients once"));
  k.push_back(text_key("train.precision", [](TrainConfig& c) -> auto& { return c.train.precision; }, {"fp32", "bf16"},
                       "`fp32`, `bf16`: matrix products and convolutions in bf16, norms, softmax, losses and "
                       "reductions in fp32, weights, gradients and optimizer state fp32 (docs/design.md); "
                       "fp16 is not built"));
  k.push_back(real_key("train.label_smoothing", [](TrainConfig& c) -> auto& { return c.train.label_smoothing; },
                       within({0, 1, false, true}), "[0, 1): cross_entropy's, as torch's `label_smoothing`"));
  k.push_back(int_key("train.seed", [](TrainConfig& c) -> auto& { return c.train.seed; }, bound(0), bound(kNoLimit),
                      "≥ 0; seeds weights, data order and synthetic data"));
  k.push_back(int_key("train.threads", [](TrainConfig& c) -> auto& { return c.train.threads; }, bound(0),
                      bound(kMostThreads),
                      "0 (this host's cores divided among the job's processes on it, at least 1) to 1024"));
  k.push_back(text_key("train.device", [](TrainConfig& c) -> auto& { return c.train.device; }, {"cpu", "cuda"},
                       "`cpu`, or `cuda` (trident's CUDA build: one GPU per process, by LOCAL_RANK)"));
  k.push_back(int_key("train.log_every", [](TrainConfig& c) -> auto& { return c.train.log_every; }, bound(1),
                      bound(kNoLimit), "≥ 1 steps between metrics lines"));
  k.push_back(bool_key("train.eval", [](TrainConfig& c) -> auto& { return c.train.eval; },
                       "evaluate on the test split each epoch and at the end"));
  k.push_back(bool_key("train.profile_ops", [](TrainConfig& c) -> auto& { return c.train.profile_ops; },
                       "write `ops.json`: each rank's time per op, after the first step"));
  return k;
}

std::vector<Key> optimizer_keys() {
  std::vector<Key> k;
  k.push_back(text_key("optimizer.name", [](TrainConfig& c) -> auto& { return c.optimizer.name; }, {"sgd", "adam", "adamw"},
                       "`sgd`, `adam`, `adamw` (decoupled weight decay, as torch's `AdamW`)"));
  k.push_back(real_key("optimizer.lr", [](TrainConfig& c) -> auto& { return c.optimizer.lr; },
                       within({0, kInf, true, false}), "> 0",
                       {[](const TrainConfig& c) { return c.optimizer.name == "sgd" ? 0.05 : 1e-3; },
                        "0.05 (sgd), 0.001 (adam, adamw)"}));
  k.push_back(real_key("optimizer.momentum", [](TrainConfig& c) -> auto& { return c.optimizer.momentum; },
                       within({0, 1, false, true}), "[0, 1) (sgd)"));
  k.push_back(real_key("optimizer.weight_decay", [](TrainConfig& c) -> auto& { return c.optimizer.weight_decay; },
                       within({0, kInf}), "≥ 0",
                       {[](const TrainConfig& c) { return c.optimizer.name == "adamw" ? 0.01 : 0.0; },
                        "0, 0.01 (adamw)"}));
  k.push_back(real_key("optimizer.beta1", [](TrainConfig& c) -> auto& { return c.optimizer.beta1; },
                       within({0, 1, false, true}), "[0, 1) (adam, adamw)"));
  k.push_back(real_key("optimizer.beta2", [](TrainConfig& c) -> auto& { return c.optimizer.beta2; },
                       within({0, 1, false, true}), "[0, 1) (adam, adamw)"));
  k.push_back(real_key("optimizer.eps", [](TrainConfig& c) -> auto& { return c.optimizer.eps; },
                       within({0, kInf, true, false}), "> 0 (adam, adamw)"));
  k.push_back(text_key("optimizer.schedule", [](TrainConfig& c) -> auto& { return c.optimizer.schedule; },
                       {"constant", "cosine", "linear", "step"},
                       "`constant`, `cosine` or `linear` (to `min_lr` at the last step), `step` (times `gamma` every "
                       "`step_size` steps)"));
  k.push_back(int_key("optimizer.warmup_steps", [](TrainConfig& c) -> auto& { return c.optimizer.warmup_steps; },
                      bound(0), bound(kNoLimit), "≥ 0, linear warm-up"));
  k.push_back(real_key("optimizer.min_lr", [](TrainConfig& c) -> auto& { return c.optimizer.min_lr; },
                       [](const TrainConfig& c) { return Interval{0, c.optimizer.lr}; }, "[0, lr]"));
  k.push_back(int_key("optimizer.step_size", [](TrainConfig& c) -> auto& { return c.optimizer.step_size; },
                      bound(1), bound(kNoLimit), "≥ 1 steps (schedule `step`; counted after the warm-up)",
                      {nullptr, "— (required by `step`)"}, true));
  k.push_back(real_key("optimizer.gamma", [](TrainConfig& c) -> auto& { return c.optimizer.gamma; },
                       within({0, 1, true, false}), "(0, 1] (schedule `step`)"));
  k.push_back(real_key("optimizer.clip_norm", [](TrainConfig& c) -> auto& { return c.optimizer.clip_norm; },
                       within({0, kInf, true, false}),
                       "> 0: the gradients' global L2 norm (every parameter once, after gradient sync) is clipped "
                       "to it; the norm is logged as `grad_norm`",
                       {nullptr, "— (no clipping)"}, true));
  return k;
}

std::vector<Key> parallel_keys() {
  std::vector<Key> k;
  k.push_back(int_key("parallel.devices", [](TrainConfig& c) -> auto& { return c.parallel.devices; }, bound(1),
                      bound(kMostDevices),
                      "1 to 4096 processes (one per device); with `dp` must divide `train.mini_batch`; `trident "
                      "train --nproc N` sets it"));
  k.push_back(text_key("parallel.partitioner", [](TrainConfig& c) -> auto& { return c.parallel.partitioner; }, {},
                       "`dp` (data parallel), `graphpipe` or `pipedream` (plan a graph pipeline now), `graph` (a "
                       "GNN's nodes partitioned among the devices, docs/gnn.md), or a plan `.json` path (run that plan; a relative path is looked up beside the config file first)"));
  k.push_back(text_key("parallel.cluster", [](TrainConfig& c) -> auto& { return c.parallel.cluster; }, {},
                       "what the planner plans and predicts for: `auto` (this machine as `trident calibrate` "
                       "measured it), a preset (`cpu-local`, `summit-v100`, `dgx-a100`, `h200`, "
                       "`poseidon-40gbe`, `poseidon-10gbe`) or a cluster file"));
  k.push_back(int_key("parallel.max_replicas", [](TrainConfig& c) -> auto& { return c.parallel.max_replicas; },
                      bound(0), bound(kMostDevices),
                      "graphpipe / pipedream: at most this many data-parallel replicas per stage (0: no limit)"));
  k.push_back(int_key("parallel.micro_batch", [](TrainConfig& c) -> auto& { return c.parallel.micro_batch; }, bound(0),
                      [](const TrainConfig& c) { return c.train.mini_batch; },
                      "divides `train.mini_batch` (0: searched by the planner); in GNNPipe mode the chunks a "
                      "micro-batch holds, which read each other live",
                      {[](const TrainConfig& c) { return std::int64_t{c.model.graph_chunks > 1 ? 1 : 0}; },
                       "0; 1 in GNNPipe mode (one chunk per micro-batch)"}));
  k.push_back(int_key("parallel.micro_batch_ratio", [](TrainConfig& c) -> auto& { return c.parallel.micro_batch_ratio; },
                      bound(0), bound(64),
                      "graphpipe: a stage's micro-batch may be up to this many times the plan's smallest, a power of "
                      "two (1: one size for every stage; 0: 2 when `parallel.micro_batch` is 0, else 1)"));
  k.push_back(text_key("parallel.recompute", [](TrainConfig& c) -> auto& { return c.parallel.recompute; },
                       planner::recompute_names(),
                       "`auto` (the planner recomputes a stage's forward in its backward where the stage would not "
                       "fit otherwise), `never`, `always`; a plan file sets it per stage"));
  k.push_back(text_key("parallel.schedule", [](TrainConfig& c) -> auto& { return c.parallel.schedule; },
                       {"auto", "gpipe", "1f1b", "graph-1f1b", "zb-h1", "zb-h2", "graph-zb"},
                       "`auto` (the partition searched under graph-1f1b for graphpipe, 1f1b otherwise; then a "
                       "zero-bubble schedule instead where simulated more than 1% faster: see "
                       "[planner.md](planner.md)), `gpipe`, `1f1b`, `graph-1f1b`, or a "
                       "zero-bubble schedule that splits each backward into B and W: `zb-h1` (1f1b's memory), "
                       "`zb-h2` (about twice it), `graph-zb` (graph-1f1b's memory, W filling the waits of forks and "
                       "joins)"));
  k.push_back(text_key("parallel.grad_sync", [](TrainConfig& c) -> auto& { return c.parallel.grad_sync; },
                       cost::grad_sync_names(),
                       "`allreduce`, `ps`, `sfb` (Linear weights; the rest all-reduce), `hybrid` (per parameter by the "
                       "cost model); in a pipeline, for the replicas of each stage (a plan's own `grad_sync` entries "
                       "win)"));
  k.push_back(sync_key());
  k.push_back(int_key("parallel.staleness", [](TrainConfig& c) -> auto& { return c.parallel.staleness; }, bound(0),
                      bound(kMostStaleness),
                      "0 (BSP) to 1000; > 0 only with `ps` or `hybrid` and `partitioner: dp`: stale-synchronous parallel, no rank "
                      "more than s clocks ahead of the slowest (docs/distributed.md)"));
  k.push_back(int_key("parallel.pipeline_delay", [](TrainConfig& c) -> auto& { return c.parallel.pipeline_delay; },
                      bound(0), bound(1),
                      "0 (every step fills and drains the pipeline) or 1: PipeDream-2BW's delayed update W(t+1) = "
                      "W(t) - opt(grad at W(t-1)), two weight versions per stage, no flush between steps; 1f1b and "
                      "graph-1f1b schedules (docs/pipelines.md)"));
  k.push_back(text_key("parallel.comm_dtype", [](TrainConfig& c) -> auto& { return c.parallel.comm_dtype; },
                       {"fp32", "bf16"},
                       "`fp32`, `bf16`: the dtype of the parameter server's gradient pushes (`ps`, and the `ps` part "
                       "of `hybrid`); servers sum in fp32 and pulls stay fp32 (docs/distributed.md)"));
  k.push_back(real_key("parallel.timeout_s", [](TrainConfig& c) -> auto& { return c.parallel.timeout_s; },
                       within({1, 86400}),
                       "1 to 86400; a collective waiting longer fails, naming the rank that stopped responding"));
  k.push_back(real_key("parallel.bucket_mb", [](TrainConfig& c) -> auto& { return c.parallel.bucket_mb; },
                       within({0, 4096, true, false}), "(0, 4096]; all-reduce bucket size in MiB"));
  return k;
}

std::vector<Key> checkpoint_keys() {
  std::vector<Key> k;
  k.push_back(int_key("checkpoint.every", [](TrainConfig& c) -> auto& { return c.checkpoint.every; }, bound(0),
                      bound(kNoLimit), "≥ 0 steps between checkpoints (0: only at the end and on Ctrl-C)"));
  k.push_back(int_key("checkpoint.keep", [](TrainConfig& c) -> auto& { return c.checkpoint.keep; }, bound(1),
                      bound(kNoLimit),
                      "≥ 1 complete checkpoints kept (the newest; older ones are deleted once a newer one is "
                      "complete)"));
  return k;
}

}  // namespace

const std::vector<Key>& keys() {
  static const std::vector<Key> table = [] {
    std::vector<Key> all;
    for (auto part : {model_keys(), data_keys(), train_keys(), optimizer_keys(), parallel_keys(), checkpoint_keys()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return table;
}

// Sections in the order of the table: "" (top level), "model", "data", ...
std::vector<std::string> sections() {
  std::vector<std::string> out = {""};
  for (const auto& k : keys()) {
    const auto s = section_of(k.path);
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

// The keys allowed directly in `section` (top level: its keys and the sections).
std::vector<std::string> allowed_in(const std::string& section) {
  std::vector<std::string> out;
  for (const auto& k : keys())
    if (section_of(k.path) == section) out.push_back(section.empty() ? k.path : k.path.substr(section.size() + 1));
  if (section.empty())
    for (const auto& s : sections())
      if (!s.empty()) out.push_back(s);
  return out;
}

}  // namespace trident::config::config_keys
