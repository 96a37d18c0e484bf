// ClusterSpec: the machines a plan runs on, as the planner and simulator see
// them: devices grouped into nodes (hosts), one link kind inside a node and
// one between nodes — or, in a mixed cluster, device classes and a link per
// host and per pair of hosts (Note [Device classes]). Presets describe common
// clusters; a YAML or JSON file (same keys as `to_json`) describes any
// other. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"
#include "trident/graph/tensor_spec.h"

namespace trident::cost {

// A bad cluster name or file; the message names the field, value and fix.
using ClusterError = ComponentError<struct ClusterErrorTag, ErrorKind::kBadInput>;

using DeviceId = int;

struct DeviceSpec {
  std::string name;
  std::map<graph::DType, double> peak_flops;  // FLOP/s by dtype
  double memory_bandwidth = 0;                // bytes/s
  std::int64_t memory_bytes = 0;
  // Note [Micro-batch efficiency]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // A kernel of w FLOPs runs at
  // w / (w + half_efficiency_flops) of peak, so small micro-batches run
  // below peak. Plus a fixed launch/dispatch cost per op call.
  double half_efficiency_flops = 0;
  double launch_s = 0;

  double peak(graph::DType dtype) const;  // falls back to float32's rate
};

// Latency α (seconds) and bandwidth β (bytes/s, one direction). A
// calibrated link also keeps what was measured on it (`trident calibrate`):
// by operation ("p2p" one-way, "allreduce", "reduce", "broadcast",
// "allgather") and process count, times as (bytes, seconds) in ascending
// bytes; comm.h prices from these where they apply (see Note [Measured links]).
struct LinkSpec {
  double latency_s = 0;
  double bandwidth = 0;
  using Table = std::vector<std::pair<double, double>>;
  std::map<std::string, std::map<int, Table>> measured;
};

struct Profile;  // cost_model.h

// Note [Device classes]
// ~~~~~~~~~~~~~~~~~~~~~~
// Real clusters mix generations (V100s beside A100s, H200s beside A100s).
// A mixed cluster names its device classes (each a DeviceSpec: peak FLOP/s
// per dtype, memory, memory bandwidth) and, per host, how many devices of
// each class it holds; device ids run host by host, and inside a host class
// by class in the order the file lists them; hosts may hold different
// numbers of devices (devices_per_node is then the largest). Links: each host may have its own (NVLink 2 on one,
// NVSwitch on another; default intra_node), and every ordered pair of hosts
// has one — given in `links` (from, to; one direction given serves both
// unless the other is given too, so asymmetric links are allowed), else
// inter_node; a mixed cluster without inter_node must list every pair. A
// group of devices communicates at its slowest link (a ring's speed is its
// slowest hop's). `device` is device 0's class, for what asks for one
// device (the homogeneous search's view, see Note [Class-aware placement] in
// planner/planner.h).
struct ClusterSpec {
  std::string name;
  DeviceSpec device;
  int devices_per_node = 1;
  int nodes = 1;
  LinkSpec intra_node;
  LinkSpec inter_node;
  // See Note [Device classes]: empty for a cluster of one kind of device.
  std::vector<DeviceSpec> classes;
  std::vector<int> class_of;                           // by device id: an index into classes
  std::vector<int> host_first;                         // by node: its first device id (empty: devices_per_node each)
  std::vector<LinkSpec> host_links;                    // by node: inside it (empty: intra_node)
  std::map<std::pair<int, int>, LinkSpec> node_links;  // (from node, to node): between them (absent: inter_node)
  // CPU clusters, where a device is a process: the cores a node's processes
  // share (see Note [Shared cores] in schedule/stage_graph.h); 0 when each device
  // computes on its own (GPUs).
  int cores_per_node = 0;
  // Note [Core throughput]
  // ~~~~~~~~~~~~~~~~~~~~~~
  // What a node's cores achieve with k busy compute
  // threads, in units of one thread computing alone, entry k-1 for k = 1..K
  // as `trident calibrate` measured it (beyond K: the last entry). Empty:
  // min(k, cores_per_node), as if each core were independent. Virtual CPUs
  // that are hyperthreads, memory bandwidth and the host's other tenants
  // make the measured figure lower, and it depends on the work: a profile
  // carries its model's own figure, which comes first (cost_model.h); this
  // one (the median over the calibrated models) serves the others.
  std::vector<double> core_throughput;
  // A calibrated machine (`trident calibrate`) carries its measurements:
  // per-op profiles by "model/preset/threads", and the raw figures.
  std::map<std::string, std::shared_ptr<const Profile>> profiles;
  nlohmann::json calibration;  // null unless calibrated
  std::string note;            // for the user: where "auto" came from, or how to calibrate

  // The compute threads each process uses when `processes` share a node and
  // `requested` is 0 (see Note [Thread defaults]): cores / processes, at least 1;
  // 1 where devices do not share cores.
  int threads_per_process(int processes, int requested = 0) const;

  int capacity() const;
  int node_of(DeviceId d) const;
  DeviceId first_device(int node) const;
  bool mixed() const { return !classes.empty(); }
  // A device's class (`device` in a cluster of one kind) and its index (0 there).
  const DeviceSpec& device_at(DeviceId d) const;
  int class_index(DeviceId d) const { return mixed() ? class_of.at(static_cast<std::size_t>(d)) : 0; }
  // The devices' average: the view of a planner that ignores classes (peak
  // rates, memory and bandwidth averaged over the first `count` devices).
  DeviceSpec average_device(int count) const;
  // The link from device a to device b; between the devices of a group, its
  // slowest link (least bandwidth; inter-node as soon as the group spans
  // nodes of one kind of link).
  const LinkSpec& link(DeviceId a, DeviceId b) const;
  const LinkSpec& group_link(const std::vector<DeviceId>& devices) const;
  // The link a group of `count` devices uses when packed from a node
  // boundary, as the planner places power-of-two groups.
  const LinkSpec& packed_link(int count) const;

  // The file format (JSON is YAML too, so parse_cluster reads it back).
  // Without measurements: no profiles or raw calibration (as a plan keeps it).
  nlohmann::json to_json(bool with_measurements = true) const;
};

// Throws ClusterError (naming `where` and the entry) unless entry k-1 of a
// core throughput lies in (0, k] (see Note [Core throughput]).
void check_core_throughput(const std::vector<double>& throughput, const std::string& where);

const std::vector<std::string>& cluster_presets();

// A preset name, "auto" (this machine's calibration, see calibration_path)
// or a path to a .yaml/.yml/.json file. Throws ClusterError naming the
// unknown name (and the presets) or the bad field, or, for "auto" without a
// calibration, the command that makes one.
ClusterSpec load_cluster(const std::string& name_or_path);

// Where `trident calibrate` keeps this machine's cluster file:
// $TRIDENT_CACHE_DIR, else $XDG_CACHE_HOME/trident, else ~/.cache/trident,
// then calibration-<hostname>-v<format>.json (a new format, a new file).
std::string calibration_path();
// Parses cluster text (YAML or JSON); `origin` names it in errors.
ClusterSpec parse_cluster(const std::string& text, const std::string& origin);

}  // namespace trident::cost
