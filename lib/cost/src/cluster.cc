#include "trident/cost/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "trident/base/cores.h"
#include "trident/base/env.h"
#include "trident/base/text.h"
#include "trident/base/files.h"
#include "trident/cost/cost_model.h"

namespace trident::cost {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

DeviceSpec device(std::string name, double fp32_tflops, double fp16_tflops, double mem_gib, double bw_gbs,
                  double half_gflop, double launch_us) {
  DeviceSpec d;
  d.name = std::move(name);
  d.peak_flops[graph::DType::kFloat32] = fp32_tflops * 1e12;
  d.peak_flops[graph::DType::kFloat16] = fp16_tflops * 1e12;
  d.peak_flops[graph::DType::kBFloat16] = fp16_tflops * 1e12;
  d.memory_bytes = static_cast<std::int64_t>(mem_gib * kGiB);
  d.memory_bandwidth = bw_gbs * 1e9;
  d.half_efficiency_flops = half_gflop * 1e9;
  d.launch_s = launch_us * 1e-6;
  return d;
}

LinkSpec link(double latency_us, double bandwidth_gbs) { return {latency_us * 1e-6, bandwidth_gbs * 1e9}; }

ClusterSpec calibrated_or_rough();

// Preset figures are vendor peak numbers (see docs/planner.md); the
// efficiency knee and launch cost are modelling assumptions, stated there.
ClusterSpec preset(const std::string& name) {
  ClusterSpec c;
  c.name = name;
  if (name == "cpu-local") {
    // One process per device on this machine; rates are rough (one core
    // with AVX FMA): `trident profile` gives measured op times instead.
    const double ram_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / kGiB;
    c.device = device("cpu-core", 0.1, 0.05, ram_gib, 10, 0.001, 5);
    c.devices_per_node = 64, c.nodes = 1;
    c.intra_node = link(30, 2), c.inter_node = link(30, 2);
  } else if (name == "summit-v100") {
    // GraphPipe's testbed: 4 x V100-16GB per node, NVLink 2, EDR InfiniBand.
    c.device = device("V100-SXM2-16GB", 15.7, 125, 16, 900, 1, 10);
    c.devices_per_node = 4, c.nodes = 64;
    c.intra_node = link(5, 50), c.inter_node = link(10, 12.5);
  } else if (name == "dgx-a100") {
    // 8 x A100-80GB, NVSwitch; 8 x 200 Gb/s HDR per node (one NIC per GPU).
    c.device = device("A100-SXM4-80GB", 19.5, 312, 80, 2039, 2, 8);
    c.devices_per_node = 8, c.nodes = 32;
    c.intra_node = link(3, 300), c.inter_node = link(8, 25);
  } else if (name == "h200") {
    // 8 x H200-141GB, NVLink 4 (NVSwitch); 8 x 400 Gb/s NDR per node.
    c.device = device("H200-SXM-141GB", 67, 989, 141, 4800, 4, 6);
    c.devices_per_node = 8, c.nodes = 32;
    c.intra_node = link(3, 450), c.inter_node = link(6, 50);
  } else if (name == "poseidon-40gbe" || name == "poseidon-10gbe") {
    // Poseidon's testbed (ATC'17): single-GPU machines with a GeForce GTX
    // TITAN X (Maxwell, 12 GB) on 40 GbE, in the paper also limited to
    // 10 GbE; no fast FP16 on Maxwell.
    c.device = device("GeForce-GTX-TITAN-X-12GB", 6.6, 6.6, 12, 336, 1, 10);
    c.devices_per_node = 1, c.nodes = 32;
    const double gbs = name == "poseidon-40gbe" ? 5.0 : 1.25;
    c.intra_node = link(50, gbs), c.inter_node = link(50, gbs);
  } else if (name == "auto") {
    return calibrated_or_rough();
  } else {
    std::string names;
    for (const auto& p : cluster_presets()) names += (names.empty() ? "" : ", ") + p;
    throw ClusterError("cluster: unknown name '" + name + "'; use one of " + names +
                       ", or a .yaml/.json file describing the cluster");
  }
  return c;
}

// The most devices per node, nodes or cores a cluster file may give.
constexpr int kMostCount = 1 << 20;

class Reader {
 public:
  Reader(YAML::Node node, std::string where, std::string origin)
      : node_(std::move(node)), where_(std::move(where)), origin_(std::move(origin)) {}

  void allow(const std::set<std::string>& keys) const {
    for (const auto& kv : node_) {
      const auto key = kv.first.as<std::string>();
      if (!keys.count(key)) {
        std::string list;
        for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
        throw ClusterError(origin_ + ": unknown key '" + where_ + key + "'; allowed: " + list);
      }
    }
  }
  double positive(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    if (!node_[key]) {
      if (fallback) return *fallback;
      throw ClusterError(origin_ + ": missing '" + where_ + key + "'");
    }
    double v = 0;
    try {
      v = node_[key].as<double>();
    } catch (const YAML::Exception&) {
      throw ClusterError(origin_ + ": '" + where_ + key + "' must be a number, got '" + node_[key].Scalar() + "'");
    }
    if (!(v > 0)) throw ClusterError(origin_ + ": '" + where_ + key + "' must be > 0, got " + node_[key].Scalar());
    return v;
  }
  // A whole number from 1 to kMostCount.
  int count(const std::string& key) const {
    const double v = positive(key);
    if (v != std::floor(v) || v > kMostCount)
      throw ClusterError(origin_ + ": '" + where_ + key + "' must be a whole number from 1 to " +
                         std::to_string(kMostCount) + ", got " + node_[key].Scalar());
    return static_cast<int>(v);
  }
  std::string text(const std::string& key, const std::string& fallback) const {
    return node_[key] ? node_[key].as<std::string>() : fallback;
  }
  Reader child(const std::string& key) const {
    if (!node_[key] || !node_[key].IsMap()) throw ClusterError(origin_ + ": missing section '" + where_ + key + "'");
    return Reader(node_[key], where_ + key + ".", origin_);
  }

 private:
  YAML::Node node_;
  std::string where_, origin_;
};

// A YAML node as JSON (scalars: integer, number, true/false, null, or text).
nlohmann::json to_json(const YAML::Node& node) {
  if (node.IsMap()) {
    auto out = nlohmann::json::object();
    for (const auto& kv : node) out[kv.first.as<std::string>()] = to_json(kv.second);
    return out;
  }
  if (node.IsSequence()) {
    auto out = nlohmann::json::array();
    for (const auto& item : node) out.push_back(to_json(item));
    return out;
  }
  if (!node.IsScalar() || node.Tag() == "!") return node.IsScalar() ? nlohmann::json(node.Scalar()) : nlohmann::json();
  const auto& text = node.Scalar();
  if (text == "null" || text == "~") return nullptr;
  if (text == "true" || text == "false") return text == "true";
  char* end = nullptr;
  const long long i = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == 0) return i;
  const double d = std::strtod(text.c_str(), &end);
  if (!text.empty() && *end == 0) return d;
  return text;
}

// The measurements of `trident calibrate`: per-op profiles by
// "model/preset/threads" or "model/preset/threads/bf16" (cost::profile_key;
// each a trident-profile/1 document) and the raw figures, kept as written.
void read_calibration(const YAML::Node& root, const std::string& origin, ClusterSpec& c) {
  if (root["calibration"]) c.calibration = to_json(root["calibration"]);
  if (!root["profiles"]) return;
  if (!root["profiles"].IsMap()) throw ClusterError(origin + ": 'profiles' must map model/preset/threads to a profile");
  for (const auto& kv : root["profiles"]) {
    const auto key = kv.first.as<std::string>();
    const auto slashes = std::count(key.begin(), key.end(), '/');
    const bool bf16 = slashes == 3 && key.size() > 5 && key.compare(key.size() - 5, 5, "/bf16") == 0;
    const auto base = bf16 ? key.substr(0, key.size() - 5) : key;
    if ((slashes != 2 && !bf16) || std::atoi(base.c_str() + base.rfind('/') + 1) < 1)
      throw ClusterError(origin + ": profiles key '" + key +
                         "' must be model/preset/threads or model/preset/threads/bf16, e.g. mlp/tiny/1");
    c.profiles[key] = std::make_shared<const Profile>(Profile::from_json(to_json(kv.second), origin + ": profiles." + key));
  }
}

const char* const kCoreThroughputIs =
    "a list of numbers, entry k-1 in (0, k]: the work k busy threads do, in units of one alone";

std::vector<double> read_core_throughput(const YAML::Node& node, const std::string& origin) {
  std::vector<double> t;
  if (!node) return t;
  if (!node.IsSequence()) throw ClusterError(origin + ": core_throughput must be " + kCoreThroughputIs);
  for (const auto& v : node) {
    try {
      t.push_back(v.as<double>());
    } catch (const YAML::Exception&) {
      throw ClusterError(origin + ": core_throughput[" + std::to_string(t.size()) + "] = '" + v.Scalar() +
                         "' must be a number; core_throughput is " + kCoreThroughputIs);
    }
  }
  check_core_throughput(t, origin + ": core_throughput");
  return t;
}

// A measured table: [[bytes, seconds], ...], bytes ascending, times > 0.
LinkSpec::Table read_table(const nlohmann::json& doc, const std::string& where) {
  LinkSpec::Table t;
  try {
    for (const auto& row : doc) t.emplace_back(row.at(0).get<double>(), row.at(1).get<double>());
  } catch (const nlohmann::json::exception&) {
    throw ClusterError(where + " must be a list of [bytes, seconds] pairs");
  }
  for (std::size_t i = 0; i < t.size(); ++i)
    if (!(t[i].second > 0) || (i && !(t[i].first > t[i - 1].first)))
      throw ClusterError(where + " needs ascending bytes and positive seconds");
  return t;
}

const std::vector<std::string>& measured_operations() {
  static const std::vector<std::string> ops{"p2p", "allreduce", "alltoall", "allgather"};
  return ops;
}

LinkSpec read_link(const Reader& r, const YAML::Node& node, const std::string& where) {
  r.allow({"latency_us", "bandwidth_gbs", "measured"});
  auto l = link(r.positive("latency_us"), r.positive("bandwidth_gbs"));
  if (!node["measured"]) return l;
  const auto doc = to_json(node["measured"]);
  if (!doc.is_object()) throw ClusterError(where + ".measured must map operations to tables by process count");
  for (const auto& [op, by_ranks] : doc.items()) {
    const auto& ops = measured_operations();
    if (std::find(ops.begin(), ops.end(), op) == ops.end())
      throw ClusterError(where + ".measured: unknown operation '" + op + "'; allowed: p2p, allreduce, alltoall, "
                         "allgather");
    if (!by_ranks.is_object()) throw ClusterError(where + ".measured." + op + " must map process counts to tables");
    for (const auto& [ranks, table] : by_ranks.items()) {
      const int p = std::atoi(ranks.c_str());
      if (p < 2) throw ClusterError(where + ".measured." + op + ": key '" + ranks + "' must be a process count >= 2");
      l.measured[op][p] = read_table(table, where + ".measured." + op + "." + ranks);
    }
  }
  return l;
}

// "auto": this machine's calibration; without one, cpu-local's rough figures
// with this machine's cores, and a note saying how to calibrate.
ClusterSpec calibrated_or_rough() {
  const auto path = calibration_path();
  std::string unreadable;
  if (std::filesystem::exists(path)) try {
    auto c = parse_cluster(read_text_file<ClusterError>(path, "calibration"), path);
    c.note = "calibrated " + c.calibration.value("created", std::string("?")) + " (" + path + ")";
    if (c.cores_per_node != usable_cores())
      c.note += "; calibrated with " + std::to_string(c.cores_per_node) + " cores but this process may use " +
                std::to_string(usable_cores()) + ": run `trident calibrate` again";
    return c;
  } catch (const ClusterError& e) {  // e.g. written by an older trident: never fail a run for it
    unreadable = first_line(e);
  }
  auto c = preset("cpu-local");
  c.name = "auto";
  c.cores_per_node = usable_cores();
  c.note = (unreadable.empty() ? "this machine is not calibrated" : "the calibration is unreadable (" + unreadable + ")") +
           ": predictions use cpu-local's rough figures; `trident calibrate` measures this machine (under a "
           "minute) and writes " + path;
  return c;
}


}  // namespace

std::string calibration_path() {
  std::string dir = env_or_empty("TRIDENT_CACHE_DIR");
  if (dir.empty() && !env_or_empty("XDG_CACHE_HOME").empty()) dir = env_or_empty("XDG_CACHE_HOME") + "/trident";
  if (dir.empty()) dir = (env_or_empty("HOME").empty() ? std::string("/tmp") : env_or_empty("HOME")) + "/.cache/trident";
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  // The format's number changes when `trident calibrate` measures
  // differently, so that a cache an older trident wrote counts as missing
  // and is measured again (2: op backwards without the input gradients a
  // training pass never computes; 3: each model's core throughput).
  constexpr int kFormat = 4;  // 4: alltoall measured, reduce/broadcast no longer
  return dir + "/calibration-" + std::string(host[0] ? host : "localhost") + "-v" + std::to_string(kFormat) + ".json";
}

int ClusterSpec::threads_per_process(int processes, int requested) const {
  if (requested > 0) return requested;
  if (cores_per_node <= 0) return 1;
  return cores_per_process(cores_per_node, std::min(processes, devices_per_node));
}

double DeviceSpec::peak(graph::DType dtype) const {
  auto it = peak_flops.find(dtype);
  if (it != peak_flops.end()) return it->second;
  return peak_flops.at(graph::DType::kFloat32);
}

const LinkSpec& ClusterSpec::link(DeviceId a, DeviceId b) const {
  return node_of(a) == node_of(b) ? intra_node : inter_node;
}

const LinkSpec& ClusterSpec::group_link(const std::vector<DeviceId>& devices) const {
  for (DeviceId d : devices)
    if (node_of(d) != node_of(devices.front())) return inter_node;
  return intra_node;
}

const LinkSpec& ClusterSpec::packed_link(int count) const {
  return count <= devices_per_node ? intra_node : inter_node;
}

void check_core_throughput(const std::vector<double>& t, const std::string& where) {
  for (std::size_t k = 0; k < t.size(); ++k)
    if (!(t[k] > 0) || t[k] > static_cast<double>(k + 1) + 1e-9)
      throw ClusterError(where + "[" + std::to_string(k) + "] = " + format_number("%g", t[k]) +
                         " is out of range; it must be " + kCoreThroughputIs);
}

const std::vector<std::string>& cluster_presets() {
  static const std::vector<std::string> names{"cpu-local", "summit-v100", "dgx-a100", "h200", "poseidon-40gbe",
                                              "poseidon-10gbe"};
  return names;
}

namespace {

ClusterSpec read_cluster(const YAML::Node& root, const std::string& origin) {
  if (!root.IsMap()) throw ClusterError(origin + ": expected a mapping with name, device, devices_per_node, ...");
  Reader r(root, "", origin);
  r.allow({"name", "device", "devices_per_node", "nodes", "intra_node", "inter_node", "cores_per_node", "core_throughput",
           "profiles", "calibration"});
  ClusterSpec c;
  c.name = r.text("name", origin);
  auto d = r.child("device");
  d.allow({"name", "float32_tflops", "float16_tflops", "bfloat16_tflops", "memory_gib", "memory_bandwidth_gbs",
           "half_efficiency_gflop", "launch_us"});
  const double fp32 = d.positive("float32_tflops");
  c.device = device(d.text("name", "device"), fp32, d.positive("float16_tflops", fp32), d.positive("memory_gib"),
                    d.positive("memory_bandwidth_gbs"), d.positive("half_efficiency_gflop"), d.positive("launch_us"));
  c.device.peak_flops[graph::DType::kBFloat16] =
      d.positive("bfloat16_tflops", c.device.peak_flops[graph::DType::kFloat16] / 1e12) * 1e12;
  c.devices_per_node = r.count("devices_per_node");
  c.nodes = r.count("nodes");
  c.intra_node = read_link(r.child("intra_node"), root["intra_node"], origin + ": intra_node");
  c.inter_node = read_link(r.child("inter_node"), root["inter_node"], origin + ": inter_node");
  if (root["cores_per_node"]) c.cores_per_node = r.count("cores_per_node");
  c.core_throughput = read_core_throughput(root["core_throughput"], origin);
  read_calibration(root, origin, c);
  return c;
}

}  // namespace

ClusterSpec parse_cluster(const std::string& text, const std::string& origin) {
  try {
    return read_cluster(YAML::Load(text), origin);
  } catch (const YAML::Exception& e) {  // not YAML, or a value of the wrong kind where one is read
    const auto at = "line " + std::to_string(e.mark.line + 1) + ", column " + std::to_string(e.mark.column + 1);
    if (dynamic_cast<const YAML::ParserException*>(&e))
      throw ClusterError(origin + ": not valid YAML/JSON: " + at + ": " + e.msg);
    throw ClusterError(origin + ": " + at + ": " + e.msg + " (a value of the wrong kind)");
  }
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  const bool file = name_or_path.find('/') != std::string::npos || name_or_path.find('.') != std::string::npos;
  if (!file) return preset(name_or_path);
  return parse_cluster(read_text_file<ClusterError>(name_or_path, "cluster file"), name_or_path);
}

nlohmann::json ClusterSpec::to_json(bool with_measurements) const {
  auto link_json = [](const LinkSpec& l) {
    nlohmann::json doc{{"latency_us", l.latency_s * 1e6}, {"bandwidth_gbs", l.bandwidth / 1e9}};
    for (const auto& [op, by_ranks] : l.measured)
      for (const auto& [ranks, table] : by_ranks) doc["measured"][op][std::to_string(ranks)] = table;
    return doc;
  };
  nlohmann::json doc{{"name", name},
          {"device",
           {{"name", device.name},
            {"float32_tflops", device.peak(graph::DType::kFloat32) / 1e12},
            {"float16_tflops", device.peak(graph::DType::kFloat16) / 1e12},
            {"bfloat16_tflops", device.peak(graph::DType::kBFloat16) / 1e12},
            {"memory_gib", static_cast<double>(device.memory_bytes) / kGiB},
            {"memory_bandwidth_gbs", device.memory_bandwidth / 1e9},
            {"half_efficiency_gflop", device.half_efficiency_flops / 1e9},
            {"launch_us", device.launch_s * 1e6}}},
          {"devices_per_node", devices_per_node},
          {"nodes", nodes},
          {"intra_node", link_json(intra_node)},
          {"inter_node", link_json(inter_node)}};
  if (cores_per_node > 0) doc["cores_per_node"] = cores_per_node;
  if (!core_throughput.empty()) doc["core_throughput"] = core_throughput;
  if (!with_measurements) return doc;
  for (const auto& [key, profile] : profiles) doc["profiles"][key] = profile->to_json();
  if (!calibration.is_null()) doc["calibration"] = calibration;
  return doc;
}

}  // namespace trident::cost
