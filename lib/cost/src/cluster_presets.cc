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


}  // namespace

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

}  // namespace trident::cost::detail
