// The cluster file format: YAML or JSON, one kind of device or device
// classes (Note [Device classes]), read with every bad field named; and
// ClusterSpec::to_json, which writes it.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include <yaml-cpp/yaml.h>

#include "cluster_parts.h"
#include "trident/base/text.h"
#include "trident/cost/cost_model.h"

namespace trident::cost {
namespace {

using detail::device;
using detail::kGiB;
using detail::link;

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

}  // namespace

void check_core_throughput(const std::vector<double>& t, const std::string& where) {
  for (std::size_t k = 0; k < t.size(); ++k)
    if (!(t[k] > 0) || t[k] > static_cast<double>(k + 1) + 1e-9)
      throw ClusterError(where + "[" + std::to_string(k) + "] = " + format_number("%g", t[k]) +
                         " is out of range; it must be " + kCoreThroughputIs);
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

// The classes' list into c.classes; their index by name.
std::map<std::string, int> read_classes(const YAML::Node& list, const std::string& origin, ClusterSpec& c) {
  if (!list.IsSequence() || list.size() == 0)
    throw ClusterError(origin + ": 'classes' must be a list of device classes, each {name, float32_tflops, ...}");
  std::map<std::string, int> index;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "classes[" + std::to_string(i) + "].";
    if (!list[i].IsMap() || !list[i]["name"])
      throw ClusterError(origin + ": '" + where + "name' is missing; every class has a name that hosts count by");
    c.classes.push_back(read_device(Reader(list[i], where, origin)));
    if (!index.emplace(c.classes.back().name, static_cast<int>(i)).second)
      throw ClusterError(origin + ": '" + where + "name' = '" + c.classes.back().name + "' names two classes");
  }
  return index;
}

// Host h (`node`): its devices appended to c.class_of, class by class, and
// its link (else the intra_node default `fallback`, if any).
void read_host(const YAML::Node& node, std::size_t h, const std::map<std::string, int>& index,
               const LinkSpec* fallback, const std::string& origin, ClusterSpec& c) {
  const std::string where = "hosts[" + std::to_string(h) + "].";
  if (!node.IsMap()) throw ClusterError(origin + ": '" + where + "' must be {devices: {CLASS: COUNT}, link: {...}}");
  Reader host(node, where, origin);
  host.allow({"devices", "link"});
  auto devices = host.child("devices");
  std::vector<int> counts(c.classes.size(), 0);
  int total = 0;
  for (const auto& kv : node["devices"]) {
    const auto name = kv.first.as<std::string>();
    auto it = index.find(name);
    if (it == index.end()) {
      std::string known;
      for (const auto& cls : c.classes) known += (known.empty() ? "" : ", ") + cls.name;
      throw ClusterError(origin + ": '" + where + "devices." + name + "' names an unknown class; the classes are " + known);
    }
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
  if (node["link"]) {
    c.host_links.push_back(read_link(host.child("link"), node["link"], origin + ": " + where + "link"));
  } else if (fallback) {
    c.host_links.push_back(*fallback);
  } else {
    throw ClusterError(origin + ": '" + where + "link' is missing and there is no intra_node default");
  }
}

// The links between hosts (`list`, from -> to) into c.node_links.
void read_host_links(const YAML::Node& list, const std::string& origin, ClusterSpec& c) {
  if (!list.IsSequence()) throw ClusterError(origin + ": 'links' must be a list of {from, to, latency_us, bandwidth_gbs}");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string where = "links[" + std::to_string(i) + "].";
    const auto& node = list[i];
    if (!node.IsMap()) throw ClusterError(origin + ": '" + where + "' must be {from, to, latency_us, bandwidth_gbs}");
    Reader(node, where, origin).allow({"from", "to", "latency_us", "bandwidth_gbs", "measured"});
    if (!node["from"] || !node["to"]) throw ClusterError(origin + ": '" + where + "from' and 'to' name two hosts");
    const int a = index_in(node["from"], where + "from", 0, c.nodes - 1, origin);
    const int b = index_in(node["to"], where + "to", 0, c.nodes - 1, origin);
    if (a == b)
      throw ClusterError(origin + ": '" + where + "' links host " + std::to_string(a) + " to itself; use hosts[" +
                         std::to_string(a) + "].link");
    YAML::Node rest(YAML::NodeType::Map);
    for (const auto& kv : node)
      if (kv.first.as<std::string>() != "from" && kv.first.as<std::string>() != "to") rest[kv.first] = kv.second;
    c.node_links[{a, b}] = read_link(Reader(rest, where, origin), rest, origin + ": " + where);
  }
}

// See Note [Device classes]: classes (a list, so their order survives
// JSON), hosts (class -> count each, devices numbered in the classes'
// order), a link per host and per pair of hosts.
void read_mixed(const YAML::Node& root, const Reader& r, const std::string& origin, ClusterSpec& c) {
  const auto index = read_classes(root["classes"], origin, c);
  if (!root["hosts"].IsSequence() || root["hosts"].size() == 0)
    throw ClusterError(origin + ": 'hosts' must be a list of hosts, each {devices: {CLASS: COUNT, ...}, link: {...}}");
  const auto& hosts = root["hosts"];
  c.nodes = static_cast<int>(hosts.size());
  const bool intra = static_cast<bool>(root["intra_node"]);
  if (intra) c.intra_node = read_link(r.child("intra_node"), root["intra_node"], origin + ": intra_node");
  for (std::size_t h = 0; h < hosts.size(); ++h) read_host(hosts[h], h, index, intra ? &c.intra_node : nullptr, origin, c);
  if (!intra) c.intra_node = c.host_links.front();
  const bool fallback = static_cast<bool>(root["inter_node"]);
  if (fallback) c.inter_node = read_link(r.child("inter_node"), root["inter_node"], origin + ": inter_node");
  if (root["links"]) read_host_links(root["links"], origin, c);
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


}  // namespace

namespace detail {

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

}  // namespace detail

ClusterSpec parse_cluster(const std::string& text, const std::string& origin) {
  try {
    return detail::read_cluster(YAML::Load(text), origin);
  } catch (const YAML::Exception& e) {  // not YAML, or a value of the wrong kind where one is read
    const auto at = "line " + std::to_string(e.mark.line + 1) + ", column " + std::to_string(e.mark.column + 1);
    if (dynamic_cast<const YAML::ParserException*>(&e))
      throw ClusterError(origin + ": not valid YAML/JSON: " + at + ": " + e.msg);
    throw ClusterError(origin + ": " + at + ": " + e.msg + " (a value of the wrong kind)");
  }
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