#include "trident/cost/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "trident/base/cores.h"
#include "trident/base/cache_dir.h"
#include "trident/base/files.h"
#include "cluster_parts.h"

namespace trident::cost {

std::string calibration_path() {
  const std::string dir = cache_dir();
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

const std::vector<std::string>& cluster_presets() { return detail::preset_names(); }

ClusterSpec load_cluster(const std::string& name_or_path) {
  const bool file = name_or_path.find('/') != std::string::npos || name_or_path.find('.') != std::string::npos;
  if (!file) return detail::preset(name_or_path);
  return parse_cluster(read_text_file<ClusterError>(name_or_path, "cluster file"), name_or_path);
}

}  // namespace trident::cost
