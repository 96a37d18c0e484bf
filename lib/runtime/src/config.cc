#include "trident/runtime/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "trident/data/dataset.h"

namespace trident::runtime {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string text_of(const YAML::Node& n) {
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// Reads one section of the config, remembering the source for messages.
class Reader {
 public:
  Reader(std::string source, YAML::Node root) : source_(std::move(source)), root_(std::move(root)) {}

  [[noreturn]] void fail(const std::string& key, const YAML::Node& value, const std::string& allowed) const {
    throw ConfigError(source_ + ": " + key + " = " + text_of(value) + ": " + allowed);
  }
  [[noreturn]] void fail(const std::string& message) const { throw ConfigError(source_ + ": " + message); }

  // The section `name` (empty = top level) after checking it is a map whose
  // keys are all in `allowed`.
  YAML::Node section(const std::string& name, const std::vector<std::string>& allowed) const {
    YAML::Node node = name.empty() ? root_ : YAML::Node(root_[name]);
    if (!node || node.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!node.IsMap()) fail(name.empty() ? "the config" : name, node, "must be a mapping of keys to values");
    for (const auto& kv : node) {
      const auto key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string hint;
      for (const auto& a : allowed)
        if (edit_distance(key, a) <= 2) hint = " (did you mean '" + a + "'?)";
      throw ConfigError(source_ + ": unknown key '" + (name.empty() ? "" : name + ".") + key + "'" + hint +
                        "; allowed " + (name.empty() ? "top-level keys" : "in " + name) + ": " + join(allowed));
    }
    return node;
  }

  std::string str(const YAML::Node& sec, const std::string& key, const std::string& dflt,
                  const std::vector<std::string>& choices = {}) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    if (!n.IsScalar()) fail(key, n, "must be a string");
    const auto v = n.Scalar();
    if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end()) {
      fail(key, n, "allowed: " + join(choices));
    }
    return v;
  }

  std::int64_t integer(const YAML::Node& sec, const std::string& key, std::int64_t dflt, std::int64_t lo,
                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    const std::string range = hi == std::numeric_limits<std::int64_t>::max()
                                  ? ">= " + std::to_string(lo)
                                  : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    std::int64_t v;
    if (!n.IsScalar() || !YAML::convert<std::int64_t>::decode(n, v)) fail(key, n, "must be an integer " + range);
    if (v < lo || v > hi) fail(key, n, "must be an integer " + range);
    return v;
  }

  // A number in [lo, hi] (or [lo, hi) when `open_hi`).
  double real(const YAML::Node& sec, const std::string& key, double dflt, double lo, double hi,
              bool open_hi = false, bool open_lo = false) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    std::ostringstream range;
    range << (open_lo ? "(" : "[") << lo << ", ";
    if (hi == std::numeric_limits<double>::infinity()) range << "inf)";
    else range << hi << (open_hi ? ")" : "]");
    double v;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
      fail(key, n, "must be a number in " + range.str());
    }
    if (v < lo || v > hi || (open_hi && v == hi) || (open_lo && v == lo)) fail(key, n, "must be a number in " + range.str());
    return v;
  }

  bool boolean(const YAML::Node& sec, const std::string& key, bool dflt) const {
    const auto& n = sec[leaf(key)];
    if (!n || n.IsNull()) return dflt;
    bool v;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) fail(key, n, "must be true or false");
    return v;
  }

 private:
  static std::string leaf(const std::string& key) { return key.substr(key.rfind('.') + 1); }
  std::string source_;
  YAML::Node root_;
};

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
  YAML::Node node;
  node.reset(root);
  size_t start = 0;
  for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string part = key.substr(start, dot - start);
    if (node[part] && !node[part].IsMap()) {
      throw ConfigError("--set " + key + ": '" + key.substr(0, dot) + "' is not a section");
    }
    YAML::Node child = node[part];
    node.reset(child);
  }
  node[key.substr(start)] = value;
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
  for (const auto& o : overrides) apply_override(root, o);
  Reader r(source, root);
  TrainConfig c;

  auto top = r.section("", {"name", "model", "data", "train", "optimizer", "parallel", "checkpoint", "runs_dir"});
  auto model = r.section("model", {"name", "preset"});
  if (!model["name"]) r.fail("missing key 'model.name'; allowed: " + join(zoo::model_names()));
  c.model.name = r.str(model, "model.name", "", zoo::model_names());
  c.model.preset = r.str(model, "model.preset", "tiny", zoo::preset_names());
  c.name = r.str(top, "name", c.model.name + "-" + c.model.preset);
  if (!std::regex_match(c.name, std::regex("[A-Za-z0-9._-]+"))) {
    r.fail("name", top["name"], "must be letters, digits, '.', '_' or '-' (it names the run directory)");
  }
  c.runs_dir = r.str(top, "runs_dir", "runs");

  const auto graph = zoo::build_graph(c.model);
  auto data = r.section("data", {"name", "path", "train_size", "test_size"});
  c.data.name = r.str(data, "data.name", zoo::default_dataset(c.model.name), {"fashion-mnist", "synthetic"});
  c.data.path = r.str(data, "data.path", data::kFashionMnistDir);
  const bool fm = c.data.name == "fashion-mnist";
  c.data.train_size = r.integer(data, "data.train_size", fm ? 0 : 8192, fm ? 0 : 1, fm ? 60000 : 100000000);
  c.data.test_size = r.integer(data, "data.test_size", fm ? 0 : 1024, fm ? 0 : 1, fm ? 10000 : 100000000);
  if (fm) {
    for (const auto& op : graph.ops()) {
      const std::string field = op.attrs.value("field", "");
      if (op.is_input() && field != "image" && field != "label") {
        r.fail("data.name", data["name"] ? data["name"] : YAML::Node(c.data.name),
               "model '" + c.model.name + "' reads field '" + field + "', which fashion-mnist lacks; use synthetic");
      }
    }
    check_fashion_mnist_files(r, c.data.path);
  } else {
    constexpr std::int64_t kMaxBytes = 4LL << 30;
    const auto bytes = data::synthetic_bytes(graph, c.data.train_size + c.data.test_size);
    if (bytes > kMaxBytes) {
      r.fail("data.train_size", YAML::Node(c.data.train_size),
             "synthetic data for " + c.model.name + "/" + c.model.preset + " would take " +
                 std::to_string(bytes >> 20) + " MiB; lower data.train_size/test_size to fit 4096 MiB");
    }
  }
  const std::int64_t train_samples = fm ? (c.data.train_size ? c.data.train_size : 60000) : c.data.train_size;

  auto train = r.section("train", {"epochs", "steps", "mini_batch", "seed", "threads", "log_every", "eval"});
  c.train.epochs = r.integer(train, "train.epochs", 0, 1);
  c.train.steps = r.integer(train, "train.steps", 0, 1);
  if (c.train.epochs && c.train.steps) {
    r.fail("train.steps", train["steps"], "give either train.epochs or train.steps, not both");
  }
  if (!c.train.epochs && !c.train.steps) c.train.epochs = 1;
  c.train.mini_batch = r.integer(train, "train.mini_batch", 128, 1, train_samples);
  c.train.seed = static_cast<std::uint64_t>(r.integer(train, "train.seed", 0, 0));
  c.train.threads = r.integer(train, "train.threads", 0, 0, 1024);
  c.train.log_every = r.integer(train, "train.log_every", 50, 1);
  c.train.eval = r.boolean(train, "train.eval", true);

  auto opt = r.section("optimizer", {"name", "lr", "momentum", "weight_decay", "beta1", "beta2", "eps", "schedule",
                                     "warmup_steps", "min_lr"});
  c.optimizer.name = r.str(opt, "optimizer.name", "sgd", {"sgd", "adam"});
  const double inf = std::numeric_limits<double>::infinity();
  c.optimizer.lr = r.real(opt, "optimizer.lr", c.optimizer.name == "adam" ? 1e-3 : 0.05, 0, inf, false, true);
  c.optimizer.momentum = r.real(opt, "optimizer.momentum", 0.9, 0, 1, true);
  c.optimizer.weight_decay = r.real(opt, "optimizer.weight_decay", 0, 0, inf);
  c.optimizer.beta1 = r.real(opt, "optimizer.beta1", 0.9, 0, 1, true);
  c.optimizer.beta2 = r.real(opt, "optimizer.beta2", 0.999, 0, 1, true);
  c.optimizer.eps = r.real(opt, "optimizer.eps", 1e-8, 0, inf, false, true);
  c.optimizer.schedule = r.str(opt, "optimizer.schedule", "constant", {"constant", "cosine"});
  c.optimizer.warmup_steps = r.integer(opt, "optimizer.warmup_steps", 0, 0);
  c.optimizer.min_lr = r.real(opt, "optimizer.min_lr", 0, 0, c.optimizer.lr);

  auto par = r.section("parallel", {"devices", "partitioner", "micro_batch", "schedule", "grad_sync", "staleness",
                                    "timeout_s", "bucket_mb", "sync", "cluster", "max_replicas"});
  c.parallel.devices = r.integer(par, "parallel.devices", 1, 1, 4096);
  c.parallel.partitioner = r.str(par, "parallel.partitioner", "dp");
  const auto& p = c.parallel.partitioner;
  if (p != "graphpipe" && p != "pipedream" && p != "dp" && (p.size() < 5 || p.substr(p.size() - 5) != ".json")) {
    r.fail("parallel.partitioner", par["partitioner"], "allowed: graphpipe, pipedream, dp, or a plan .json path");
  }
  c.parallel.micro_batch = r.integer(par, "parallel.micro_batch", 0, 0, c.train.mini_batch);
  if (c.parallel.micro_batch && c.train.mini_batch % c.parallel.micro_batch) {
    r.fail("parallel.micro_batch", par["micro_batch"],
           "must divide train.mini_batch = " + std::to_string(c.train.mini_batch));
  }
  c.parallel.schedule = r.str(par, "parallel.schedule", "auto", {"auto", "gpipe", "1f1b", "graph-1f1b"});
  c.parallel.cluster = r.str(par, "parallel.cluster", "cpu-local");
  c.parallel.max_replicas = r.integer(par, "parallel.max_replicas", 0, 0, 4096);
  c.parallel.grad_sync = r.str(par, "parallel.grad_sync", "allreduce", {"allreduce", "ps", "sfb", "hybrid"});
  c.parallel.staleness = r.integer(par, "parallel.staleness", 0, 0, 1000);
  c.parallel.timeout_s = r.real(par, "parallel.timeout_s", 60, 1, 86400);
  c.parallel.bucket_mb = r.real(par, "parallel.bucket_mb", 25, 0, 4096, false, true);
  if (par["sync"] && !par["sync"].IsNull()) {
    if (!par["sync"].IsMap()) r.fail("parallel.sync", par["sync"], "must map parameter names to allreduce, ps or sfb");
    for (const auto& kv : par["sync"]) {
      const auto method = kv.second.Scalar();
      if (method != "allreduce" && method != "ps" && method != "sfb")
        r.fail("parallel.sync." + kv.first.Scalar(), kv.second, "allowed: allreduce, ps, sfb");
      c.parallel.sync[kv.first.Scalar()] = method;
    }
  }
  if (c.parallel.devices > 1) {
    if (c.parallel.partitioner == "dp" && c.train.mini_batch % c.parallel.devices)
      r.fail("parallel.devices", par["devices"],
             "must divide train.mini_batch = " + std::to_string(c.train.mini_batch) +
                 " (each process takes an equal slice of every batch)");
    if (c.parallel.staleness > 0 && c.parallel.grad_sync != "ps" && c.parallel.grad_sync != "hybrid")
      r.fail("parallel.staleness", par["staleness"],
             "applies to the parameter server; use parallel.grad_sync=ps (or hybrid), or staleness 0");
  }

  auto ck = r.section("checkpoint", {"every", "keep"});
  c.checkpoint.every = r.integer(ck, "checkpoint.every", 0, 0);
  c.checkpoint.keep = r.integer(ck, "checkpoint.keep", 2, 1);
  return c;
}

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) throw ConfigError("--config " + path + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  auto c = parse_config(text.str(), overrides, path);
  // A relative plan path is looked up beside the config file first.
  auto& plan = c.parallel.partitioner;
  if (plan.size() > 5 && plan.substr(plan.size() - 5) == ".json" && std::filesystem::path(plan).is_relative()) {
    const auto beside = std::filesystem::path(path).parent_path() / plan;
    if (!std::filesystem::exists(plan) && std::filesystem::exists(beside)) plan = beside.string();
  }
  return c;
}

std::string TrainConfig::to_yaml() const {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "name" << YAML::Value << name;
  e << YAML::Key << "model" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value
    << model.name << YAML::Key << "preset" << YAML::Value << model.preset << YAML::EndMap;
  e << YAML::Key << "data" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value << data.name
    << YAML::Key << "path" << YAML::Value << data.path << YAML::Key << "train_size" << YAML::Value << data.train_size
    << YAML::Key << "test_size" << YAML::Value << data.test_size << YAML::EndMap;
  e << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  if (train.epochs) e << YAML::Key << "epochs" << YAML::Value << train.epochs;
  if (train.steps) e << YAML::Key << "steps" << YAML::Value << train.steps;
  e << YAML::Key << "mini_batch" << YAML::Value << train.mini_batch << YAML::Key << "seed" << YAML::Value
    << train.seed << YAML::Key << "threads" << YAML::Value << train.threads << YAML::Key << "log_every"
    << YAML::Value << train.log_every << YAML::Key << "eval" << YAML::Value << train.eval << YAML::EndMap;
  e << YAML::Key << "optimizer" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value
    << optimizer.name << YAML::Key << "lr" << YAML::Value << optimizer.lr << YAML::Key << "momentum" << YAML::Value
    << optimizer.momentum << YAML::Key << "weight_decay" << YAML::Value << optimizer.weight_decay << YAML::Key
    << "beta1" << YAML::Value << optimizer.beta1 << YAML::Key << "beta2" << YAML::Value << optimizer.beta2
    << YAML::Key << "eps" << YAML::Value << optimizer.eps << YAML::Key << "schedule" << YAML::Value
    << optimizer.schedule << YAML::Key << "warmup_steps" << YAML::Value << optimizer.warmup_steps << YAML::Key
    << "min_lr" << YAML::Value << optimizer.min_lr << YAML::EndMap;
  e << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap << YAML::Key << "devices" << YAML::Value
    << parallel.devices << YAML::Key << "partitioner" << YAML::Value << parallel.partitioner << YAML::Key
    << "micro_batch" << YAML::Value << parallel.micro_batch << YAML::Key << "schedule" << YAML::Value
    << parallel.schedule << YAML::Key << "cluster" << YAML::Value << parallel.cluster << YAML::Key
    << "max_replicas" << YAML::Value << parallel.max_replicas << YAML::Key << "grad_sync" << YAML::Value << parallel.grad_sync << YAML::Key
    << "staleness" << YAML::Value << parallel.staleness << YAML::Key << "timeout_s" << YAML::Value
    << parallel.timeout_s << YAML::Key << "bucket_mb" << YAML::Value << parallel.bucket_mb;
  if (!parallel.sync.empty()) {
    e << YAML::Key << "sync" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : parallel.sync) e << YAML::Key << k << YAML::Value << v;
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  e << YAML::Key << "checkpoint" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "every"
    << YAML::Value << checkpoint.every << YAML::Key << "keep" << YAML::Value << checkpoint.keep << YAML::EndMap;
  e << YAML::Key << "runs_dir" << YAML::Value << runs_dir;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace trident::runtime
