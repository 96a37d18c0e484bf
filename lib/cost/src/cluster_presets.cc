// The cluster presets (vendor figures, docs/planner.md) and `auto`.
#include <unistd.h>

#include <filesystem>

#include "cluster_parts.h"
#include "trident/base/cores.h"
#include "trident/base/files.h"
#include "trident/base/text.h"

namespace trident::cost::detail {

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

namespace {

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

// The presets: one YAML document whose `presets` are cluster files in the
// format users write (docs/planner.md), each device and link written once
// (&anchor) and named where a preset uses it (*alias). Peak rates and
// bandwidths are vendor figures; latencies and the efficiency knee
// (half_efficiency_gflop) are modelling assumptions, stated there.
constexpr const char* kPresets = R"(
devices:
  # One core with AVX FMA, roughly: `trident profile` gives measured op times
  # instead. memory_gib is replaced by this machine's memory.
  - &cpu_core {name: cpu-core, float32_tflops: 0.1, float16_tflops: 0.05, memory_gib: 1, memory_bandwidth_gbs: 10,
               half_efficiency_gflop: 0.001, launch_us: 5}
  - &v100 {name: V100-SXM2-16GB, float32_tflops: 15.7, float16_tflops: 125, memory_gib: 16, memory_bandwidth_gbs: 900,
           half_efficiency_gflop: 1, launch_us: 10}
  - &a100 {name: A100-SXM4-80GB, float32_tflops: 19.5, float16_tflops: 312, memory_gib: 80, memory_bandwidth_gbs: 2039,
           half_efficiency_gflop: 2, launch_us: 8}
  - &h200 {name: H200-SXM-141GB, float32_tflops: 67, float16_tflops: 989, memory_gib: 141, memory_bandwidth_gbs: 4800,
           half_efficiency_gflop: 4, launch_us: 6}
  # Maxwell: no fast FP16.
  - &titan_x {name: GeForce-GTX-TITAN-X-12GB, float32_tflops: 6.6, float16_tflops: 6.6, memory_gib: 12,
              memory_bandwidth_gbs: 336, half_efficiency_gflop: 1, launch_us: 10}
links:
  - &loopback {latency_us: 30, bandwidth_gbs: 2}
  - &nvlink2 {latency_us: 5, bandwidth_gbs: 50}
  - &nvswitch {latency_us: 3, bandwidth_gbs: 300}
  - &nvlink4 {latency_us: 3, bandwidth_gbs: 450}
  - &edr {latency_us: 10, bandwidth_gbs: 12.5}        # EDR InfiniBand, 100 Gb/s
  - &hdr200 {latency_us: 8, bandwidth_gbs: 25}        # 200 Gb/s HDR per GPU
  - &ndr400 {latency_us: 6, bandwidth_gbs: 50}        # 400 Gb/s NDR per GPU
  - &gbe40 {latency_us: 50, bandwidth_gbs: 5}
  - &gbe10 {latency_us: 50, bandwidth_gbs: 1.25}
presets:
  # One process per device on this machine.
  - {name: cpu-local, device: *cpu_core, devices_per_node: 64, nodes: 1, intra_node: *loopback, inter_node: *loopback}
  # GraphPipe's testbed: 4 x V100-16GB per node, NVLink 2, EDR InfiniBand.
  - {name: summit-v100, device: *v100, devices_per_node: 4, nodes: 64, intra_node: *nvlink2, inter_node: *edr}
  # 8 x A100-80GB, NVSwitch; 8 x 200 Gb/s HDR per node (one NIC per GPU).
  - {name: dgx-a100, device: *a100, devices_per_node: 8, nodes: 32, intra_node: *nvswitch, inter_node: *hdr200}
  # 8 x H200-141GB, NVLink 4 (NVSwitch); 8 x 400 Gb/s NDR per node.
  - {name: h200, device: *h200, devices_per_node: 8, nodes: 32, intra_node: *nvlink4, inter_node: *ndr400}
  # Poseidon's testbed (ATC'17): single-GPU machines on 40 GbE, in the paper
  # also limited to 10 GbE.
  - {name: poseidon-40gbe, device: *titan_x, devices_per_node: 1, nodes: 32, intra_node: *gbe40, inter_node: *gbe40}
  - {name: poseidon-10gbe, device: *titan_x, devices_per_node: 1, nodes: 32, intra_node: *gbe10, inter_node: *gbe10}
  # See Note [Device classes]: a lab's two generations, one host each, joined
  # by EDR InfiniBand.
  - name: mixed-v100-a100
    classes: [*v100, *a100]
    hosts: [{devices: {V100-SXM2-16GB: 8}, link: *nvlink2}, {devices: {A100-SXM4-80GB: 8}, link: *nvswitch}]
    intra_node: *nvlink2
    inter_node: *edr
  # A cloud job that got 4 H200s (one host) and 12 A100s (three hosts of 4),
  # 200 Gb/s HDR between hosts.
  - name: mixed-h200-a100
    classes: [*h200, *a100]
    hosts: [{devices: {H200-SXM-141GB: 4}, link: *nvlink4}, {devices: {A100-SXM4-80GB: 4}, link: *nvswitch},
            {devices: {A100-SXM4-80GB: 4}, link: *nvswitch}, {devices: {A100-SXM4-80GB: 4}, link: *nvswitch}]
    intra_node: *nvswitch
    inter_node: *hdr200
)";

// The presets' YAML nodes by name, in the document's order.
const std::vector<std::pair<std::string, YAML::Node>>& preset_nodes() {
  static const auto nodes = [] {
    std::vector<std::pair<std::string, YAML::Node>> out;
    for (const auto& node : YAML::Load(kPresets)["presets"]) out.emplace_back(node["name"].as<std::string>(), node);
    return out;
  }();
  return nodes;
}

}  // namespace

const std::vector<std::string>& preset_names() {
  static const auto names = [] {
    std::vector<std::string> out;
    for (const auto& entry : preset_nodes()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

ClusterSpec preset(const std::string& name) {
  if (name == "auto") return calibrated_or_rough();
  for (const auto& [preset_name, node] : preset_nodes()) {
    if (preset_name != name) continue;
    // A copy: reading a yaml-cpp node can add to it, and presets are read from any thread.
    auto c = read_cluster(YAML::Clone(node), "preset " + name);
    if (name == "cpu-local")
      c.device.memory_bytes = static_cast<std::int64_t>(static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                                                        sysconf(_SC_PAGE_SIZE));
    return c;
  }
  throw ClusterError("cluster: unknown name '" + name + "'; use one of " + join(cluster_presets()) +
                     ", or a .yaml/.json file describing the cluster");
}

}  // namespace trident::cost::detail
