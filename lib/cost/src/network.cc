// Formulas: see comm.h and docs/algorithms.md §1.
#include "trident/cost/network.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "trident/base/enum_names.h"
#include "trident/base/text.h"

namespace trident::cost {

namespace {

const EnumNames<SyncMethod>& sync_method_table() {  // a function: other files' static tables may call it
  static const EnumNames<SyncMethod> names{
      {SyncMethod::kAllReduce, "allreduce"}, {SyncMethod::kPs, "ps"}, {SyncMethod::kSfb, "sfb"}};
  return names;
}

}  // namespace

std::string to_string(SyncMethod m) { return sync_method_table().name(m); }

SyncMethod sync_method_from_string(const std::string& text) {
  if (const auto m = sync_method_table().parse(text)) return *m;
  throw ClusterError("gradient sync method '" + text + "' is unknown; allowed: " + join(sync_method_names()));
}

const std::vector<std::string>& sync_method_names() {
  static const std::vector<std::string> names = sync_method_table().names();
  return names;
}

const std::vector<std::string>& grad_sync_names() {
  static const std::vector<std::string> names = {"hybrid", "allreduce", "ps", "sfb"};
  return names;
}

namespace {

// A measured time at `bytes`: linear between the measured sizes, the
// smallest's time below them, and beyond the largest its time plus the rest
// at the link's bandwidth.
double lookup(const LinkSpec::Table& t, const LinkSpec& link, double bytes) {
  if (bytes <= t.front().first) return t.front().second;
  if (bytes >= t.back().first) return t.back().second + (bytes - t.back().first) / link.bandwidth;
  const auto hi = std::lower_bound(t.begin(), t.end(), bytes, [](const auto& row, double b) { return row.first < b; });
  const auto lo = hi - 1;
  const double f = (bytes - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

// The α-β formulas of Gloo's algorithms.
double formula_s(const std::string& op, const LinkSpec& link, double bytes, int ranks) {
  const double a = link.latency_s, b = link.bandwidth;
  if (op == "p2p") return a + bytes / b;
  if (op == "allreduce") return 2 * (ranks - 1) * a + allreduce_bytes(bytes, ranks) / b;
  if (op == "alltoall") return (ranks - 1) * (a + bytes / ranks / b);  // `bytes` per rank, 1/P to each
  return (ranks - 1) * (a + bytes / b);                               // allgather: `bytes` from each rank
}

// See Note [Measured links]: the table for `op` at `ranks` processes, or the
// nearest count below (else above) scaled by the formula; the formula alone
// when nothing was measured.
double priced_s(const std::string& op, const LinkSpec& link, double bytes, int ranks) {
  if (ranks <= 1 || bytes <= 0) return 0;
  auto found = link.measured.find(op);
  if (found == link.measured.end() || found->second.empty()) return formula_s(op, link, bytes, ranks);
  const auto& by_ranks = found->second;
  auto it = by_ranks.upper_bound(ranks);
  if (it != by_ranks.begin()) --it;
  const double measured = lookup(it->second, link, bytes);
  if (it->first == ranks) return measured;
  return measured * formula_s(op, link, bytes, ranks) / formula_s(op, link, bytes, it->first);
}

}  // namespace

double p2p_s(const LinkSpec& link, double bytes) { return priced_s("p2p", link, bytes, 2); }

double allreduce_bytes(double tensor_bytes, int ranks) { return 2 * tensor_bytes * (ranks - 1) / ranks; }
double ps_bytes(double tensor_bytes, int ranks, double push_scale) {
  return (1 + push_scale) * tensor_bytes * (ranks - 1) / ranks;
}

double sfb_bytes(std::int64_t rows_per_rank, std::int64_t m, std::int64_t n, std::int64_t element_bytes, int ranks) {
  return static_cast<double>(rows_per_rank) * (ranks - 1) * static_cast<double>(m + n) * element_bytes;
}

double allreduce_s(const LinkSpec& link, double tensor_bytes, int ranks) {
  return priced_s("allreduce", link, tensor_bytes, ranks);
}

// See Note [Sharded parameter server]: an alltoall push and an alltoall pull,
// P−1 messages of S/P bytes each — a ring all-reduce's steps and bytes, so
// priced as the all-reduce unless the link's alltoall was measured.
// A narrower push (push_scale < 1) moves that share of the bytes one way.
double ps_s(const LinkSpec& link, double tensor_bytes, int ranks, double push_scale) {
  if (!link.measured.count("alltoall")) return allreduce_s(link, tensor_bytes * (1 + push_scale) / 2, ranks);
  return priced_s("alltoall", link, tensor_bytes * push_scale, ranks) + priced_s("alltoall", link, tensor_bytes, ranks);
}

double sfb_s(const LinkSpec& link, const DeviceSpec& device, std::int64_t rows_per_rank, std::int64_t m,
             std::int64_t n, std::int64_t element_bytes, int ranks) {
  if (ranks <= 1) return 0;
  const double rebuild_flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * rows_per_rank * ranks;
  // Two all-gathers, of the activations (K·M) and of the errors (K·N).
  const double e = static_cast<double>(element_bytes), k = static_cast<double>(rows_per_rank);
  return priced_s("allgather", link, k * m * e, ranks) + priced_s("allgather", link, k * n * e, ranks) +
         rebuild_flops / device.peak(graph::DType::kFloat32);
}

namespace {

bool is_captured_linear(const graph::Op& op, const graph::ParamSpec& weight) {
  if (op.kind != "aten" || op.inputs.size() != 1) return false;
  const auto calls = op.attrs.find("calls");
  if (calls == op.attrs.end() || !calls->is_array() || calls->size() != 2) return false;
  const auto& t = (*calls)[0];
  const auto& mm = (*calls)[1];
  auto arg_is = [](const nlohmann::json& a, const char* key, const nlohmann::json& value) {
    return a.is_object() && a.size() == 1 && a.contains(key) && a.at(key) == value;
  };
  if (t.value("op", "") != "aten::t" || !t.contains("args") || t["args"].size() != 1 ||
      !arg_is(t["args"][0], "param", weight.name))
    return false;
  const auto result = op.attrs.find("result");
  if (result == op.attrs.end() || !arg_is(*result, "call", 1) || mm.contains("kwargs")) return false;
  const auto& args = mm.value("args", nlohmann::json::array());
  const auto name = mm.value("op", "");
  if (name == "aten::addmm")
    return args.size() == 3 && args[0].is_object() && args[0].contains("param") && arg_is(args[1], "in", 0) &&
           arg_is(args[2], "call", 0);
  if (name == "aten::mm") return args.size() == 2 && arg_is(args[0], "in", 0) && arg_is(args[1], "call", 0);
  return false;
}

}  // namespace

std::optional<SfbShape> sfb_shape(const graph::Op& op, const graph::ParamSpec& param) {
  if (param.shape.size() != 2) return std::nullopt;
  const bool zoo_linear = op.kind == "linear" && param.name.size() >= 7 &&
                          param.name.compare(param.name.size() - 7, 7, ".weight") == 0;
  if (!zoo_linear && !is_captured_linear(op, param)) return std::nullopt;
  SfbShape s;
  s.n = param.shape[0], s.m = param.shape[1];
  s.factor_rows_per_sample = std::max<std::int64_t>(1, op.output.elements() / s.n);
  return s;
}

SyncChoice sync_cost(SyncMethod method, const graph::Op& op, const graph::ParamSpec& param,
                     std::int64_t samples_per_rank, int ranks, const LinkSpec& link, const DeviceSpec& device,
                     const SyncWire& wire) {
  const double bytes = static_cast<double>(param.bytes());
  switch (method) {
    case SyncMethod::kAllReduce:
      return {method, allreduce_s(link, bytes, ranks), ranks > 1 ? allreduce_bytes(bytes, ranks) : 0};
    case SyncMethod::kPs:
      return {method, ps_s(link, bytes, ranks, wire.ps_push_scale),
              ranks > 1 ? ps_bytes(bytes, ranks, wire.ps_push_scale) : 0};
    case SyncMethod::kSfb: {
      auto s = sfb_shape(op, param);
      if (!s) throw ClusterError("sfb applies only to Linear weights; '" + param.name + "' is not one");
      const auto eb = wire.factor_bytes ? wire.factor_bytes : graph::element_bytes(param.dtype);
      const auto rows = samples_per_rank * s->factor_rows_per_sample;
      return {method, sfb_s(link, device, rows, s->m, s->n, eb, ranks),
              ranks > 1 ? sfb_bytes(rows, s->m, s->n, eb, ranks) : 0};
    }
  }
  return {};
}

SyncChoice choose_sync(const graph::Op& op, const graph::ParamSpec& param, std::int64_t samples_per_rank, int ranks,
                       const LinkSpec& link, const DeviceSpec& device, double bucket_bytes, const SyncWire& wire,
                       bool sfb_allowed) {
  auto best = sync_cost(SyncMethod::kAllReduce, op, param, samples_per_rank, ranks, link, device, wire);
  if (ranks <= 1) return best;
  const bool bucketed = bucket_bytes > 0 && static_cast<double>(param.bytes()) <= bucket_bytes;
  auto weighed = [&](const SyncChoice& c) { return bucketed ? c.bytes / link.bandwidth : c.seconds; };
  double best_s = weighed(best);
  auto ps = sync_cost(SyncMethod::kPs, op, param, samples_per_rank, ranks, link, device, wire);
  if (weighed(ps) <= best_s * (1 + kPsMemoryTieBreak)) best = ps, best_s = weighed(ps);
  if (sfb_allowed && sfb_shape(op, param)) {
    auto sfb = sync_cost(SyncMethod::kSfb, op, param, samples_per_rank, ranks, link, device, wire);
    if (sfb.seconds < best_s) best = sfb;
  }
  return best;
}

}  // namespace trident::cost
