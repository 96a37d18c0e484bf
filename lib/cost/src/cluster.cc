#include "trident/cost/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "trident/base/files.h"

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
  } else {
    std::string names;
    for (const auto& p : cluster_presets()) names += (names.empty() ? "" : ", ") + p;
    throw ClusterError("cluster: unknown name '" + name + "'; use one of " + names +
                       ", or a .yaml/.json file describing the cluster");
  }
  return c;
}

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

LinkSpec read_link(const Reader& r) {
  r.allow({"latency_us", "bandwidth_gbs"});
  return link(r.positive("latency_us"), r.positive("bandwidth_gbs"));
}

}  // namespace

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

const std::vector<std::string>& cluster_presets() {
  static const std::vector<std::string> names{"cpu-local", "summit-v100", "dgx-a100", "h200"};
  return names;
}

ClusterSpec parse_cluster(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ClusterError(origin + ": not valid YAML/JSON: " + e.msg);
  }
  if (!root.IsMap()) throw ClusterError(origin + ": expected a mapping with name, device, devices_per_node, ...");
  Reader r(root, "", origin);
  r.allow({"name", "device", "devices_per_node", "nodes", "intra_node", "inter_node"});
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
  c.devices_per_node = static_cast<int>(r.positive("devices_per_node"));
  c.nodes = static_cast<int>(r.positive("nodes"));
  c.intra_node = read_link(r.child("intra_node"));
  c.inter_node = read_link(r.child("inter_node"));
  return c;
}

ClusterSpec load_cluster(const std::string& name_or_path) {
  const bool file = name_or_path.find('/') != std::string::npos || name_or_path.find('.') != std::string::npos;
  if (!file) return preset(name_or_path);
  return parse_cluster(read_text_file<ClusterError>(name_or_path, "cluster file"), name_or_path);
}

nlohmann::json ClusterSpec::to_json() const {
  auto link_json = [](const LinkSpec& l) {
    return nlohmann::json{{"latency_us", l.latency_s * 1e6}, {"bandwidth_gbs", l.bandwidth / 1e9}};
  };
  return {{"name", name},
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
}

}  // namespace trident::cost
