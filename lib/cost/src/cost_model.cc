#include "trident/cost/cost_model.h"
#include "trident/base/json.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "trident/base/files.h"

namespace trident::cost {
namespace {

// Bytes an op reads and writes per sample besides its weights.
double io_bytes(const graph::Op& op) {
  double bytes = static_cast<double>(op.output.bytes());
  for (const auto& in : op.inputs) bytes += static_cast<double>(in.expected.bytes());
  return bytes;
}

// Weight bytes one call touches: all of them, except an embedding bag, which
// reads only the rows of its bag (one element per FLOP).
double weight_traffic(const graph::Op& op, std::int64_t rows) {
  if (op.kind == "embedding_bag") return op.forward_flops * static_cast<double>(rows) * 4;
  return static_cast<double>(op.param_bytes());
}

// See Note [Micro-batch efficiency] in cluster.h.
class Analytic final : public ICostModel {
 public:
  explicit Analytic(DeviceSpec d) : d_(std::move(d)) {}

  double forward_s(const graph::Op& op, std::int64_t rows) const override {
    return time(op.forward_flops, weight_traffic(op, rows) + rows * io_bytes(op), op, rows, 1);
  }
  double backward_s(const graph::Op& op, std::int64_t rows) const override {
    // Input and weight gradients: two kernels when the op has weights.
    const int kernels = op.params.empty() ? 1 : 2;
    return time(op.backward_flops, 2 * weight_traffic(op, rows) + 2 * rows * io_bytes(op), op, rows,
                kernels);
  }
  nlohmann::json describe() const override { return {{"kind", "analytic"}, {"device", d_.name}}; }

 private:
  double time(double flops_per_sample, double bytes, const graph::Op& op, std::int64_t rows, int kernels) const {
    const double work = flops_per_sample * static_cast<double>(rows);
    const double compute = work > 0 ? (work + kernels * d_.half_efficiency_flops) / d_.peak(op.output.dtype) : 0;
    const double memory = bytes / d_.memory_bandwidth;
    return kernels * d_.launch_s + std::max(compute, memory);
  }
  DeviceSpec d_;
};

class Profiled final : public ICostModel {
 public:
  Profiled(Profile p, std::string origin) : p_(std::move(p)), origin_(std::move(origin)) {}

  double forward_s(const graph::Op& op, std::int64_t rows) const override {
    return interpolate(p_.ops.at(op.name).forward_s, rows);
  }
  double backward_s(const graph::Op& op, std::int64_t rows) const override {
    return interpolate(p_.ops.at(op.name).backward_s, rows);
  }
  double weight_grad_s(const graph::Op& op, std::int64_t rows) const override {
    const auto& t = p_.ops.at(op.name);
    return t.weight_s.empty() ? interpolate(t.forward_s, rows) : interpolate(t.weight_s, rows);
  }
  nlohmann::json describe() const override {
    // The profile itself, so that a plan can be simulated again anywhere.
    return {{"kind", "profiled"}, {"profile", origin_}, {"device", p_.device}, {"data", p_.to_json()}};
  }
  std::vector<double> core_throughput() const override { return p_.core_throughput; }

 private:
  double interpolate(const std::vector<double>& t, std::int64_t rows) const {
    const auto& r = p_.rows;
    if (rows <= r.front()) return t.front();
    if (rows >= r.back()) return t.back() * static_cast<double>(rows) / static_cast<double>(r.back());
    std::size_t i = std::upper_bound(r.begin(), r.end(), rows) - r.begin();
    const double f = static_cast<double>(rows - r[i - 1]) / static_cast<double>(r[i] - r[i - 1]);
    return t[i - 1] + f * (t[i] - t[i - 1]);
  }
  Profile p_;
  std::string origin_;
};

}  // namespace

double CostModel::forward_s(const graph::Op& op, std::int64_t rows) const {
  return rows <= 0 || op.is_input() ? 0 : impl_->forward_s(op, rows);
}

double CostModel::backward_s(const graph::Op& op, std::int64_t rows) const {
  return rows <= 0 || op.is_input() ? 0 : impl_->backward_s(op, rows);
}

double CostModel::weight_grad_s(const graph::Op& op, std::int64_t rows) const {
  if (rows <= 0 || op.is_input() || op.params.empty()) return 0;
  return std::min(impl_->weight_grad_s(op, rows), impl_->backward_s(op, rows));
}

CostModel analytic_cost_model(const DeviceSpec& device) { return CostModel(std::make_shared<Analytic>(device)); }

nlohmann::json Profile::to_json() const {
  nlohmann::json doc{{"format", "trident-profile/1"}, {"model", model}, {"preset", preset},
                     {"device", device},           {"rows", rows},   {"ops", nlohmann::json::object()}};
  for (const auto& [name, t] : ops) {
    doc["ops"][name] = {{"forward_s", t.forward_s}, {"backward_s", t.backward_s}};
    if (!t.weight_s.empty()) doc["ops"][name]["weight_s"] = t.weight_s;
  }
  if (!core_throughput.empty()) doc["core_throughput"] = core_throughput;
  return doc;
}

Profile Profile::from_json(const nlohmann::json& doc, const std::string& origin) {
  try {
    auto fail = [&](const std::string& what) { throw ClusterError("profile " + origin + ": " + what); };
    if (!has_format(doc, "trident-profile/1"))
      fail("not a trident profile (expected \"format\": \"trident-profile/1\"); write one with `trident profile`");
    Profile p;
    try {
      p.model = doc.at("model").get<std::string>();
      p.preset = doc.at("preset").get<std::string>();
      p.device = doc.value("device", "");
      p.rows = get_checked<std::vector<std::int64_t>>(doc.at("rows"));
      for (const auto& [name, t] : doc.at("ops").items()) {
        p.ops[name] = {t.at("forward_s").get<std::vector<double>>(), t.at("backward_s").get<std::vector<double>>(),
                       t.value("weight_s", std::vector<double>{})};
      }
      p.core_throughput = doc.value("core_throughput", std::vector<double>{});
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("bad field: ") + e.what());
    }
    check_core_throughput(p.core_throughput, "profile " + origin + ": core_throughput");
    if (p.rows.empty()) fail("'rows' is empty");
    for (std::size_t i = 0; i < p.rows.size(); ++i)
      if (p.rows[i] < 1 || (i && p.rows[i] <= p.rows[i - 1])) fail("'rows' must be ascending and >= 1");
    for (const auto& [name, t] : p.ops) {
      if (t.forward_s.size() != p.rows.size() || t.backward_s.size() != p.rows.size())
        fail("op '" + name + "' needs one forward_s and one backward_s per entry of 'rows' (" +
             std::to_string(p.rows.size()) + ")");
      for (double v : t.forward_s)
        if (!(v >= 0)) fail("op '" + name + "' has a negative or missing time");
      for (double v : t.backward_s)
        if (!(v >= 0)) fail("op '" + name + "' has a negative or missing time");
      if (!t.weight_s.empty() && t.weight_s.size() != p.rows.size())
        fail("op '" + name + "': weight_s needs one time per entry of 'rows' (" + std::to_string(p.rows.size()) +
             ") or none");
      for (double v : t.weight_s)
        if (!(v >= 0)) fail("op '" + name + "' has a negative weight_s");
    }
    return p;
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong kind, e.g. a list where a number goes
    throw ClusterError("profile " + origin + ": " + e.what());
  }
}

Profile load_profile(const std::string& path) {
  return Profile::from_json(read_json_file<ClusterError>(path, "profile (write one with `trident profile`)"), path);
}

namespace {

// See class_cost_model: another model's times, scaled.
class Scaled final : public ICostModel {
 public:
  Scaled(CostModel base, double factor, std::string device) : base_(std::move(base)), factor_(factor), device_(std::move(device)) {}
  double forward_s(const graph::Op& op, std::int64_t rows) const override { return factor_ * base_.forward_s(op, rows); }
  double backward_s(const graph::Op& op, std::int64_t rows) const override { return factor_ * base_.backward_s(op, rows); }
  double weight_grad_s(const graph::Op& op, std::int64_t rows) const override {
    return factor_ * base_.weight_grad_s(op, rows);
  }
  nlohmann::json describe() const override {
    return {{"kind", "scaled"}, {"device", device_}, {"factor", factor_}, {"base", base_.describe()}};
  }
  std::vector<double> core_throughput() const override { return base_.core_throughput(); }

 private:
  CostModel base_;
  double factor_;
  std::string device_;
};

}  // namespace

CostModel class_cost_model(const CostModel& base, const DeviceSpec& base_device, const DeviceSpec& device) {
  if (base.describe().value("kind", "") == "analytic") return analytic_cost_model(device);
  const double factor = base_device.peak(graph::DType::kFloat32) / device.peak(graph::DType::kFloat32);
  return CostModel(std::make_shared<Scaled>(base, factor, device.name));
}

namespace {

// The first op of `graph` that `profile` did not measure, or null.
const graph::Op* unprofiled_op(const Profile& profile, const graph::OpGraph& graph) {
  for (const auto& op : graph.ops())
    if (!op.is_input() && !profile.ops.count(op.name)) return &op;
  return nullptr;
}

}  // namespace

CostModel profiled_cost_model(const Profile& profile, const graph::OpGraph& graph, const std::string& origin) {
  if (const auto* op = unprofiled_op(profile, graph))
    throw ClusterError("profile " + origin + ": op '" + op->name + "' of model " + graph.name() +
                       " is not in it (profiled " + profile.model + "/" + profile.preset +
                       "); profile this model with `trident profile`");
  return CostModel(std::make_shared<Profiled>(profile, origin));
}

std::string profile_key(const std::string& model, const std::string& preset, int threads, graph::Precision precision) {
  return model + "/" + preset + "/" + std::to_string(threads) +
         (precision == graph::Precision::kFp32 ? "" : "/" + graph::to_string(precision));
}

namespace {

// The profile of `prefix` in `precision` at the thread count nearest below
// `threads` (else the smallest), or null; `found` gets its count.
std::shared_ptr<const Profile> nearest_profile(const ClusterSpec& cluster, const std::string& prefix, int threads,
                                               graph::Precision precision, int* found) {
  const std::string suffix = precision == graph::Precision::kFp32 ? "" : "/" + graph::to_string(precision);
  auto order = [threads](int t) { return t <= threads ? std::pair(0, -t) : std::pair(1, t); };
  std::shared_ptr<const Profile> best;
  for (const auto& [key, profile] : cluster.profiles) {
    if (key.compare(0, prefix.size(), prefix) != 0 || key.size() == prefix.size() ||
        !std::isdigit(static_cast<unsigned char>(key[prefix.size()])))
      continue;
    std::size_t digits = 0;
    const int t = std::stoi(key.substr(prefix.size()), &digits);
    if (key.substr(prefix.size() + digits) != suffix) continue;  // another precision
    if (!best || order(t) < order(*found)) best = profile, *found = t;
  }
  return best;
}

}  // namespace

CostModel cost_model_for(const ClusterSpec& cluster, const graph::OpGraph& graph, const std::string& preset,
                         int threads, std::string* source, graph::Precision precision) {
  const std::string prefix = graph.name() + "/" + preset + "/";
  int best_threads = 0;
  auto best = nearest_profile(cluster, prefix, threads, precision, &best_threads);
  std::string note;
  if (!best && precision != graph::Precision::kFp32) {
    best = nearest_profile(cluster, prefix, threads, graph::Precision::kFp32, &best_threads);
    precision = graph::Precision::kFp32;
    note = "; measured in fp32: this calibration has no bf16 profiles";
  }
  const std::string origin = cluster.name + ": " + profile_key(graph.name(), preset, best_threads, precision);
  // A profile of another graph under this name (a captured model called
  // "transformer" beside the zoo's calibrated one) prices nothing here.
  const graph::Op* missing = best ? unprofiled_op(*best, graph) : nullptr;
  if (!best || missing) {
    if (source)
      *source = "analytic (" + cluster.device.name + ")" +
                (missing ? "; the profile " + origin + " is of another graph (no op '" + missing->name + "')" : "");
    return analytic_cost_model(cluster.device);
  }
  if (source) *source = "measured per op (" + origin + (best_threads == 1 ? " thread" : " threads") + note + ")";
  return profiled_cost_model(*best, graph, origin);
}

double optimizer_s(const DeviceSpec& device, double param_bytes, int tensors, int optimizer_states) {
  if (tensors == 0) return 0;
  return tensors * device.launch_s + param_bytes * (3 + 2 * optimizer_states) / device.memory_bandwidth;
}

}  // namespace trident::cost
