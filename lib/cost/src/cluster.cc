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
  } else if (name == "mixed-v100-a100") {
    // See Note [Device classes]: a lab's two generations, one host each —
    // 8 x V100-16GB (NVLink 2) and 8 x A100-80GB (NVSwitch) — joined by
    // EDR InfiniBand.
    c.classes = {device("V100-SXM2-16GB", 15.7, 125, 16, 900, 1, 10), device("A100-SXM4-80GB", 19.5, 312, 80, 2039, 2, 8)};
    c.devices_per_node = 8, c.nodes = 2;
    c.class_of = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    c.intra_node = link(5, 50), c.inter_node = link(10, 12.5);
    c.host_links = {link(5, 50), link(3, 300)};
  } else if (name == "mixed-h200-a100") {
    // A cloud job that got 4 H200s (one host, NVLink 4) and 12 A100s (three
    // hosts of 4, NVSwitch), 200 Gb/s HDR between hosts.
    c.classes = {device("H200-SXM-141GB", 67, 989, 141, 4800, 4, 6), device("A100-SXM4-80GB", 19.5, 312, 80, 2039, 2, 8)};
    c.devices_per_node = 4, c.nodes = 4;
    c.class_of = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    c.intra_node = link(3, 300), c.inter_node = link(8, 25);
    c.host_links = {link(3, 450), link(3, 300), link(3, 300), link(3, 300)};
  } else if (name == "auto") {
    return calibrated_or_rough();
  } else {
    std::string names;
    for (const auto& p : cluster_presets()) names += (names.empty() ? "" : ", ") + p;
    throw ClusterError("cluster: unknown name '" + name + "'; use one of " + names +
                       ", or a .yaml/.json file describing the cluster");
  }
  if (c.mixed()) c.device = c.classes[static_cast<std::size_t>(c.class_of[0])];
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

int ClusterSpec::capacity() const {
  return host_first.empty() ? devices_per_node * nodes : static_cast<int>(class_of.size());
}

int ClusterSpec::node_of(DeviceId d) const {
  if (host_first.empty()) return d / devices_per_node;
  return static_cast<int>(std::upper_bound(host_first.begin(), host_first.end(), d) - host_first.begin()) - 1;
}

DeviceId ClusterSpec::first_device(int node) const {
  return host_first.empty() ? node * devices_per_node : host_first.at(static_cast<std::size_t>(node));
}

const DeviceSpec& ClusterSpec::device_at(DeviceId d) const {
  return mixed() ? classes.at(static_cast<std::size_t>(class_of.at(static_cast<std::size_t>(d)))) : device;
}

DeviceSpec ClusterSpec::average_device(int count) const {
  if (!mixed() || count < 1) return device;
  DeviceSpec a;
  a.name = "average of " + std::to_string(count);
  double memory = 0;
  for (int d = 0; d < count; ++d) {
    const auto& x = device_at(d);
    for (auto t : {graph::DType::kFloat32, graph::DType::kFloat16, graph::DType::kBFloat16})
      a.peak_flops[t] += x.peak(t) / count;
    memory += static_cast<double>(x.memory_bytes) / count;
    a.memory_bandwidth += x.memory_bandwidth / count;
    a.half_efficiency_flops += x.half_efficiency_flops / count;
    a.launch_s += x.launch_s / count;
  }
  a.memory_bytes = static_cast<std::int64_t>(memory);
  return a;
}

const LinkSpec& ClusterSpec::link(DeviceId a, DeviceId b) const {
  const int na = node_of(a), nb = node_of(b);
  if (na == nb) return host_links.empty() ? intra_node : host_links.at(static_cast<std::size_t>(na));
  auto it = node_links.find({na, nb});
  if (it == node_links.end()) it = node_links.find({nb, na});
  return it == node_links.end() ? inter_node : it->second;
}

const LinkSpec& ClusterSpec::group_link(const std::vector<DeviceId>& devices) const {
  if (!mixed() && host_links.empty() && node_links.empty()) {
    for (DeviceId d : devices)
      if (node_of(d) != node_of(devices.front())) return inter_node;
    return intra_node;
  }
  // One device per node stands for it, two for a node the group uses twice.
  std::vector<DeviceId> first(static_cast<std::size_t>(nodes), -1);
  std::vector<int> count(static_cast<std::size_t>(nodes), 0);
  for (DeviceId d : devices) {
    auto n = static_cast<std::size_t>(node_of(d));
    if (first[n] < 0) first[n] = d;
    ++count[n];
  }
  const LinkSpec* slowest = nullptr;
  auto consider = [&](const LinkSpec& l) {
    if (!slowest || l.bandwidth < slowest->bandwidth ||
        (l.bandwidth == slowest->bandwidth && l.latency_s > slowest->latency_s))
      slowest = &l;
  };
  for (std::size_t a = 0; a < first.size(); ++a) {
    if (first[a] < 0) continue;
    if (count[a] > 1) consider(link(first[a], first[a]));
    for (std::size_t b = 0; b < first.size(); ++b)
      if (b != a && first[b] >= 0) consider(link(first[a], first[b]));
  }
  return slowest ? *slowest : intra_node;
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
  static const std::vector<std::string> names{"cpu-local",      "summit-v100",     "dgx-a100",       "h200",
                                              "poseidon-40gbe", "poseidon-10gbe",  "mixed-v100-a100", "mixed-h200-a100"};
  return names;
}

namespace {

DeviceSpec read_device(const Reader& d) {
  d.allow({"name", "float32_tflops", "float16_tflops", "bfloat16_tflops", "memory_gib", "memory_bandwidth_gbs",
           "half_efficiency_gflop", "launch_us"});
  const double fp32 = d.positive("float32_tflops");
  auto out = device(d.text("name", "device"), fp32, d.positive("float16_tflops", fp32), d.positive("memory_gib"),
                    d.positive("memory_bandwidth_gbs"), d.positive("half_efficiency_gflop"), d.positive("launch_us"));
  out.peak_flops[graph::DType::kBFloat16] =
      d.positive("bfloat16_tflops", out.peak_flops[graph::DType::kFloat16] / 1e12) * 1e12;
  return out;
}

// A whole number in [lo, hi] at `node` (named `where` in errors).
int index_in(const YAML::Node& node, const std::string& where, int lo, int hi, const std::string& origin) {
  double v = 0;
  try {
    v = node.as<double>();
  } catch (const YAML::Exception&) {
    throw ClusterError(origin + ": '" + where + "' must be a host number, got '" + node.Scalar() + "'");
  }
  if (v != std::floor(v) || v < lo || v > hi)
    throw ClusterError(origin + ": '" + where + "' = " + node.Scalar() + " must be a host from " + std::to_string(lo) +
                       " to " + std::to_string(hi));
  return static_cast<int>(v);
}

// See Note [Device classes]: classes (a list, so their order survives
// JSON), hosts (class -> count each, devices numbered in the classes'
// order), a link per host and per pair of hosts.
void read_mixed(const YAML::Node& root, const Reader& r, const std::string& origin, ClusterSpec& c) {
  if (!root["classes"].IsSequence() || root["classes"].size() == 0)
    throw ClusterError(origin + ": 'classes' must be a list of device classes, each {name, float32_tflops, ...}");
  std::map<std::string, int> index;
  for (std::size_t i = 0; i < root["classes"].size(); ++i) {
    const std::string where = "classes[" + std::to_string(i) + "].";
    Reader d(root["classes"][i], where, origin);
    if (!root["classes"][i].IsMap() || !root["classes"][i]["name"])
      throw ClusterError(origin + ": '" + where + "name' is missing; every class has a name that hosts count by");
    c.classes.push_back(read_device(d));
    if (!index.emplace(c.classes.back().name, static_cast<int>(i)).second)
      throw ClusterError(origin + ": '" + where + "name' = '" + c.classes.back().name + "' names two classes");
  }
  std::string known;
  for (const auto& cls : c.classes) known += (known.empty() ? "" : ", ") + cls.name;
  if (!root["hosts"].IsSequence() || root["hosts"].size() == 0)
    throw ClusterError(origin + ": 'hosts' must be a list of hosts, each {devices: {CLASS: COUNT, ...}, link: {...}}");
  const auto& hosts = root["hosts"];
  c.nodes = static_cast<int>(hosts.size());
  if (root["intra_node"]) c.intra_node = read_link(r.child("intra_node"), root["intra_node"], origin + ": intra_node");
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const std::string where = "hosts[" + std::to_string(h) + "].";
    Reader host(hosts[h], where, origin);
    if (!hosts[h].IsMap()) throw ClusterError(origin + ": '" + where + "' must be {devices: {CLASS: COUNT}, link: {...}}");
    host.allow({"devices", "link"});
    auto devices = host.child("devices");
    std::vector<int> counts(c.classes.size(), 0);
    int total = 0;
    for (const auto& kv : hosts[h]["devices"]) {
      const auto name = kv.first.as<std::string>();
      auto it = index.find(name);
      if (it == index.end())
        throw ClusterError(origin + ": '" + where + "devices." + name + "' names an unknown class; the classes are " + known);
      counts[static_cast<std::size_t>(it->second)] = devices.count(name);
      total += counts[static_cast<std::size_t>(it->second)];
    }
    if (total < 1) throw ClusterError(origin + ": '" + where + "devices' holds no device");
    if (static_cast<std::int64_t>(c.class_of.size()) + total > kMostCount)
      throw ClusterError(origin + ": '" + where + "devices' brings the cluster over " + std::to_string(kMostCount) +
                         " devices");
    c.devices_per_node = std::max(c.devices_per_node, total);
    c.host_first.push_back(static_cast<int>(c.class_of.size()));
    for (std::size_t k = 0; k < counts.size(); ++k) c.class_of.insert(c.class_of.end(), counts[k], static_cast<int>(k));
    if (hosts[h]["link"]) {
      c.host_links.push_back(read_link(host.child("link"), hosts[h]["link"], origin + ": " + where + "link"));
    } else if (root["intra_node"]) {
      c.host_links.push_back(c.intra_node);
    } else {
      throw ClusterError(origin + ": '" + where + "link' is missing and there is no intra_node default");
    }
  }
  if (!root["intra_node"]) c.intra_node = c.host_links.front();
  const bool fallback = static_cast<bool>(root["inter_node"]);
  if (fallback) c.inter_node = read_link(r.child("inter_node"), root["inter_node"], origin + ": inter_node");
  if (root["links"]) {
    if (!root["links"].IsSequence()) throw ClusterError(origin + ": 'links' must be a list of {from, to, latency_us, bandwidth_gbs}");
    for (std::size_t i = 0; i < root["links"].size(); ++i) {
      const std::string where = "links[" + std::to_string(i) + "].";
      const auto& node = root["links"][i];
      Reader l(node, where, origin);
      if (!node.IsMap()) throw ClusterError(origin + ": '" + where + "' must be {from, to, latency_us, bandwidth_gbs}");
      l.allow({"from", "to", "latency_us", "bandwidth_gbs", "measured"});
      if (!node["from"] || !node["to"]) throw ClusterError(origin + ": '" + where + "from' and 'to' name two hosts");
      const int a = index_in(node["from"], where + "from", 0, c.nodes - 1, origin);
      const int b = index_in(node["to"], where + "to", 0, c.nodes - 1, origin);
      if (a == b) throw ClusterError(origin + ": '" + where + "' links host " + std::to_string(a) + " to itself; use hosts[" + std::to_string(a) + "].link");
      YAML::Node rest(YAML::NodeType::Map);
      for (const auto& kv : node)
        if (kv.first.as<std::string>() != "from" && kv.first.as<std::string>() != "to") rest[kv.first] = kv.second;
      c.node_links[{a, b}] = read_link(Reader(rest, where, origin), rest, origin + ": " + where);
    }
  }
  if (!fallback) {
    if (c.nodes > 1) c.inter_node = c.node_links.empty() ? c.intra_node : c.node_links.begin()->second;
    for (int a = 0; a < c.nodes; ++a)
      for (int b = a + 1; b < c.nodes; ++b)
        if (!c.node_links.count({a, b}) && !c.node_links.count({b, a}))
          throw ClusterError(origin + ": links: no link between host " + std::to_string(a) + " and host " +
                             std::to_string(b) + "; give one in 'links' ({from, to, latency_us, bandwidth_gbs}) or an "
                             "inter_node default");
  }
  c.device = c.classes[static_cast<std::size_t>(c.class_of.front())];
}

ClusterSpec read_cluster(const YAML::Node& root, const std::string& origin) {
  if (!root.IsMap()) throw ClusterError(origin + ": expected a mapping with name, device, devices_per_node, ...");
  Reader r(root, "", origin);
  ClusterSpec c;
  c.name = r.text("name", origin);
  if (root["classes"] || root["hosts"]) {
    r.allow({"name", "classes", "hosts", "intra_node", "inter_node", "links", "cores_per_node", "core_throughput",
             "profiles", "calibration"});
    if (!root["classes"] || !root["hosts"])
      throw ClusterError(origin + ": a mixed cluster gives both 'classes' and 'hosts' (see docs/heterogeneous.md)");
    read_mixed(root, r, origin, c);
  } else {
    r.allow({"name", "device", "devices_per_node", "nodes", "intra_node", "inter_node", "cores_per_node",
             "core_throughput", "profiles", "calibration"});
    c.device = read_device(r.child("device"));
    c.devices_per_node = r.count("devices_per_node");
    c.nodes = r.count("nodes");
    c.intra_node = read_link(r.child("intra_node"), root["intra_node"], origin + ": intra_node");
    c.inter_node = read_link(r.child("inter_node"), root["inter_node"], origin + ": inter_node");
  }
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
  auto device_json = [](const DeviceSpec& d) {
    return nlohmann::json{{"name", d.name},
                          {"float32_tflops", d.peak(graph::DType::kFloat32) / 1e12},
                          {"float16_tflops", d.peak(graph::DType::kFloat16) / 1e12},
                          {"bfloat16_tflops", d.peak(graph::DType::kBFloat16) / 1e12},
                          {"memory_gib", static_cast<double>(d.memory_bytes) / kGiB},
                          {"memory_bandwidth_gbs", d.memory_bandwidth / 1e9},
                          {"half_efficiency_gflop", d.half_efficiency_flops / 1e9},
                          {"launch_us", d.launch_s * 1e6}};
  };
  nlohmann::json doc{{"name", name}};
  if (mixed()) {  // See Note [Device classes]
    for (const auto& c : classes) doc["classes"].push_back(device_json(c));
    for (int n = 0; n < nodes; ++n) {
      nlohmann::json host{{"devices", nlohmann::json::object()}};
      for (int d = first_device(n); d < capacity() && node_of(d) == n; ++d) {
        const auto& cls = classes[static_cast<std::size_t>(class_of[static_cast<std::size_t>(d)])].name;
        host["devices"][cls] = host["devices"].value(cls, 0) + 1;
      }
      host["link"] = link_json(link(first_device(n), first_device(n)));
      doc["hosts"].push_back(host);
    }
    doc["intra_node"] = link_json(intra_node);
    doc["inter_node"] = link_json(inter_node);
    for (const auto& [pair, l] : node_links) {
      auto j = link_json(l);
      j["from"] = pair.first, j["to"] = pair.second;
      doc["links"].push_back(j);
    }
  } else {
    doc["device"] = device_json(device);
    doc["devices_per_node"] = devices_per_node;
    doc["nodes"] = nodes;
    doc["intra_node"] = link_json(intra_node);
    doc["inter_node"] = link_json(inter_node);
  }
  if (cores_per_node > 0) doc["cores_per_node"] = cores_per_node;
  if (!core_throughput.empty()) doc["core_throughput"] = core_throughput;
  if (!with_measurements) return doc;
  for (const auto& [key, profile] : profiles) doc["profiles"][key] = profile->to_json();
  if (!calibration.is_null()) doc["calibration"] = calibration;
  return doc;
}

}  // namespace trident::cost
