// CostModel: how long one op takes, forward and backward, for a given number
// of rows (samples) on one device. The partitioner, the scheduler's stage
// costs and the simulator all ask the same model, so a plan's predictions
// and its search agree.
//
// Two implementations behind one value type (callers hold a CostModel, not a
// pointer):
//   - analytic: FLOPs and bytes over the device's rates, with the
//     micro-batch efficiency curve of Note [Micro-batch efficiency];
//   - profiled: per-op times measured at several row counts (profile.json,
//     written by `trident profile`), interpolated.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/cost/cluster.h"
#include "trident/graph/op_graph.h"
#include "trident/graph/precision.h"

namespace trident::cost {

class ICostModel {
 public:
  virtual ~ICostModel() = default;
  virtual double forward_s(const graph::Op& op, std::int64_t rows) const = 0;
  virtual double backward_s(const graph::Op& op, std::int64_t rows) const = 0;
  // Of backward_s, the weight gradients' own work (a split backward's W,
  // Note [Split backward] in schedule.h); by default the op's forward, whose
  // product the weight gradient repeats with other operands.
  virtual double weight_grad_s(const graph::Op& op, std::int64_t rows) const { return forward_s(op, rows); }
  virtual nlohmann::json describe() const = 0;
  virtual std::vector<double> core_throughput() const { return {}; }
};

class CostModel {
 public:
  explicit CostModel(std::shared_ptr<const ICostModel> impl) : impl_(std::move(impl)) {}
  // 0 for rows == 0 and for input ops (a dataset read is not modelled).
  double forward_s(const graph::Op& op, std::int64_t rows) const;
  double backward_s(const graph::Op& op, std::int64_t rows) const;
  // 0 for an op without parameters; never more than backward_s.
  double weight_grad_s(const graph::Op& op, std::int64_t rows) const;
  // {"kind": "analytic", ...} or {"kind": "profiled", "profile": path}.
  nlohmann::json describe() const { return impl_->describe(); }
  // See Note [Core throughput] (cluster.h) as measured with this model's own
  // passes; empty when not measured.
  std::vector<double> core_throughput() const { return impl_->core_throughput(); }

 private:
  std::shared_ptr<const ICostModel> impl_;
};

CostModel analytic_cost_model(const DeviceSpec& device);

// The same model for another device (a class of a mixed cluster, Note
// [Device classes] in cluster.h): analytic — the analytic model of
// `device`; measured (profiled, or any other) — `base`'s times scaled by
// the ratio of the two devices' float32 peaks, since only `base_device`
// was measured.
CostModel class_cost_model(const CostModel& base, const DeviceSpec& base_device, const DeviceSpec& device);

// Measured per-op times: "trident-profile/1".
struct Profile {
  std::string model, preset, device;
  std::vector<std::int64_t> rows;  // ascending, e.g. 1, 2, 4, 8
  struct Times {
    std::vector<double> forward_s, backward_s;  // one per entry of `rows`
    // Of backward_s, the backward asked for the op's weight gradients alone
    // (an op with parameters); empty when not measured (older profiles).
    std::vector<double> weight_s;
  };
  std::map<std::string, Times> ops;  // by op name
  // See Note [Core throughput] measured with this model's training passes
  // (`trident calibrate`); empty when not measured.
  std::vector<double> core_throughput;

  nlohmann::json to_json() const;
  // Throws ClusterError naming the file and the bad field.
  static Profile from_json(const nlohmann::json& doc, const std::string& origin);
};

Profile load_profile(const std::string& path);

// Every non-input op of `graph` must be in the profile (else ClusterError
// naming the first missing op). Times between measured row counts are
// interpolated linearly; below the smallest they stay at its time (small
// batches are overhead-bound); above the largest they grow in proportion.
CostModel profiled_cost_model(const Profile& profile, const graph::OpGraph& graph, const std::string& origin);

// What a cluster implies for `model`/`preset` run with `threads` compute
// threads per process in `precision`: its calibrated profile of that model
// (at the thread count nearest below, else the smallest) when it has one,
// else the analytic model of its device. `source` (if given) says which.
// A bf16 run takes the profiles measured in bf16 (keys ending "/bf16", see
// Note [Calibration]); where the cluster has none (a CPU without bf16
// hardware, an older calibration) it takes the fp32 ones, and `source`
// says so. A profile that lacks an op of `graph` is of another model of the
// same name (a captured model named as a zoo model): the analytic model,
// and `source` says so.
CostModel cost_model_for(const ClusterSpec& cluster, const graph::OpGraph& graph, const std::string& preset,
                         int threads, std::string* source = nullptr,
                         graph::Precision precision = graph::Precision::kFp32);
// The key of a calibrated profile in ClusterSpec::profiles: "model/preset/threads",
// with "/bf16" appended for one measured in bf16.
std::string profile_key(const std::string& model, const std::string& preset, int threads, graph::Precision precision);

// One optimizer step over `param_bytes` held in `tensors` tensors, with
// `optimizer_states` state tensors per parameter (0 SGD, 1 momentum, 2 Adam):
// memory-bound, 3 + 2·states passes over the bytes (read weight and gradient,
// write weight; read and write each state), plus a launch per tensor.
double optimizer_s(const DeviceSpec& device, double param_bytes, int tensors, int optimizer_states);

}  // namespace trident::cost
