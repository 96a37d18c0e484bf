// Internal: what the cluster's three files share — cluster.cc (the cluster
// as the planner asks it: devices, links, nodes), cluster_presets.cc (the
// presets and `auto`), cluster_file.cc (the YAML/JSON file format).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "trident/cost/cluster.h"

namespace trident::cost::detail {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// A device from vendor units: TFLOP/s (bf16 as fp16), GiB, GB/s, GFLOP, µs.
DeviceSpec device(std::string name, double fp32_tflops, double fp16_tflops, double mem_gib, double bw_gbs,
                  double half_gflop, double launch_us);
// A link from µs and GB/s.
LinkSpec link(double latency_us, double bandwidth_gbs);
// A cluster file's YAML (parse_cluster reads text through it; the presets
// are nodes of one document). Throws ClusterError naming `origin` and the field.
ClusterSpec read_cluster(const YAML::Node& root, const std::string& origin);
// The presets' names, in the order `trident plan --help` lists them.
const std::vector<std::string>& preset_names();
// A preset by name, or "auto" (this machine's calibration, else cpu-local's
// rough figures with a note); throws ClusterError naming the presets.
ClusterSpec preset(const std::string& name);

}  // namespace trident::cost::detail
