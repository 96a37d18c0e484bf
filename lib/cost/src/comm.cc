// Formulas: see comm.h and docs/algorithms.md §1.
#include "trident/cost/comm.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "trident/base/text.h"

namespace trident::cost {

std::string to_string(SyncMethod m) {
  switch (m) {
    case SyncMethod::kAllReduce: return "allreduce";
    case SyncMethod::kPs: return "ps";
    case SyncMethod::kSfb: return "sfb";
  }
  return "?";
}

SyncMethod sync_method_from_string(const std::string& text) {
  if (text == "allreduce") return SyncMethod::kAllReduce;
  if (text == "ps") return SyncMethod::kPs;
  if (text == "sfb") return SyncMethod::kSfb;
  throw ClusterError("gradient sync method '" + text + "' is unknown; allowed: " + join(sync_method_names()));
}

const std::vector<std::string>& sync_method_names() {
  static const std::vector<std::string> names = {"allreduce", "ps", "sfb"};
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

int log2_ceil(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

// The α-β formulas of Gloo's algorithms.
double formula_s(const std::string& op, const LinkSpec& link, double bytes, int ranks) {
  const double a = link.latency_s, b = link.bandwidth;
  if (op == "p2p") return a + bytes / b;
  if (op == "allreduce") return 2 * (ranks - 1) * a + allreduce_bytes(bytes, ranks) / b;
  // Ring reduce-scatter, then every shard to the root.
  if (op == "reduce") return ranks * a + (bytes * (ranks - 1) / ranks) / b + bytes / ranks / b;
  if (op == "broadcast") return log2_ceil(ranks) * (a + bytes / b);  // binomial tree
  return (ranks - 1) * (a + bytes / b);                               // allgather: `bytes` from each rank
}

// Note [Measured links]: the table for `op` at `ranks` processes, or the
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
double ps_bytes(double tensor_bytes, int ranks) {
  if (ranks <= 1) return 0;
  const auto t = ps_traffic(tensor_bytes, 4, ranks, 0);
  double total = 0;
  for (double b : t.sent) total += b;
  return total / ranks;
}

// Mirrors gloo::reduce (gloo/reduce.cc): segment size, segment count and the
// offsets each iteration sends, then the gather of chunks to the root.
Traffic gloo_reduce_traffic(double bytes, int element_bytes, int ranks, int root) {
  Traffic t{std::vector<double>(ranks, 0), std::vector<double>(ranks, 0)};
  if (ranks <= 1 || bytes <= 0) return t;
  using U = std::uint64_t;
  const U total = static_cast<U>(bytes), elem = static_cast<U>(element_bytes), p = static_cast<U>(ranks);
  auto round_up = [](U v, U m) { return (v + m - 1) / m * m; };
  const U max_segment = elem * ((U{1} << 20) / elem);  // ReduceOptions::kMaxSegmentSize
  const U segment = round_up(std::min((total + p * 2 - 1) / (p * 2), max_segment), elem);
  const U segments = round_up(std::max((total + segment - 1) / segment, p * 2), p);
  const U per_rank = segments / p, chunk = per_rank * segment;
  auto length = [&](U offset, U most) { return offset >= total ? 0.0 : static_cast<double>(std::min(most, total - offset)); };
  // Each rank sends every segment of the ring but the two it skips (those
  // just before its starting segment), to rank - 1; the segments' lengths
  // add up to the whole tensor. O(P), not O(P x segments).
  const double whole = static_cast<double>(total);
  for (U r = 0; r < p; ++r) {
    const int to = static_cast<int>((r + p - 1) % p);
    const U start = (r + 1) * per_rank;
    double n = whole;
    for (U skip : {start + segments - 2, start + segments - 1}) n -= length((skip % segments) * segment, segment);
    t.sent[r] += n, t.received[to] += n;
    if (static_cast<int>(r) == root) continue;
    const double g = length(r * per_rank * segment, chunk);
    t.sent[r] += g, t.received[root] += g;
  }
  return t;
}

// Mirrors gloo::broadcast: ranks are renumbered so the root is 0; in round
// i every rank below 2^i (they hold the data) sends it to its number + 2^i.
Traffic gloo_broadcast_traffic(double bytes, int ranks, int root) {
  Traffic t{std::vector<double>(ranks, 0), std::vector<double>(ranks, 0)};
  if (ranks <= 1 || bytes <= 0) return t;
  for (int bit = 1; bit < ranks; bit <<= 1)
    for (int v = 0; v < bit && v + bit < ranks; ++v)
      t.sent[(v + root) % ranks] += bytes, t.received[(v + bit + root) % ranks] += bytes;
  return t;
}

Traffic ps_traffic(double bytes, int element_bytes, int ranks, int owner) {
  auto t = gloo_reduce_traffic(bytes, element_bytes, ranks, owner);
  const auto b = gloo_broadcast_traffic(bytes, ranks, owner);
  for (int r = 0; r < ranks; ++r) t.sent[r] += b.sent[r], t.received[r] += b.received[r];
  return t;
}
double sfb_bytes(std::int64_t rows_per_rank, std::int64_t m, std::int64_t n, std::int64_t element_bytes, int ranks) {
  return static_cast<double>(rows_per_rank) * (ranks - 1) * static_cast<double>(m + n) * element_bytes;
}

double allreduce_s(const LinkSpec& link, double tensor_bytes, int ranks) {
  return priced_s("allreduce", link, tensor_bytes, ranks);
}

// The runtime's parameter server: a reduce to the tensor's owner, then the
// owner's broadcast of the updated tensor.
double ps_s(const LinkSpec& link, double tensor_bytes, int ranks) {
  return priced_s("reduce", link, tensor_bytes, ranks) + priced_s("broadcast", link, tensor_bytes, ranks);
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

std::optional<SfbShape> sfb_shape(const graph::Op& op, const graph::ParamSpec& param) {
  if (op.kind != "linear" || param.shape.size() != 2) return std::nullopt;
  if (param.name.size() < 7 || param.name.compare(param.name.size() - 7, 7, ".weight") != 0) return std::nullopt;
  SfbShape s;
  s.n = param.shape[0], s.m = param.shape[1];
  s.factor_rows_per_sample = std::max<std::int64_t>(1, op.output.elements() / s.n);
  return s;
}

SyncChoice sync_cost(SyncMethod method, const graph::Op& op, const graph::ParamSpec& param,
                     std::int64_t samples_per_rank, int ranks, const LinkSpec& link, const DeviceSpec& device) {
  const double bytes = static_cast<double>(param.bytes());
  switch (method) {
    case SyncMethod::kAllReduce:
      return {method, allreduce_s(link, bytes, ranks), ranks > 1 ? allreduce_bytes(bytes, ranks) : 0};
    case SyncMethod::kPs:
      return {method, ps_s(link, bytes, ranks), ranks > 1 ? ps_bytes(bytes, ranks) : 0};
    case SyncMethod::kSfb: {
      auto s = sfb_shape(op, param);
      if (!s) throw ClusterError("sfb applies only to Linear weights; '" + param.name + "' is not one");
      const auto eb = graph::element_bytes(param.dtype);
      const auto rows = samples_per_rank * s->factor_rows_per_sample;
      return {method, sfb_s(link, device, rows, s->m, s->n, eb, ranks),
              ranks > 1 ? sfb_bytes(rows, s->m, s->n, eb, ranks) : 0};
    }
  }
  return {};
}

SyncChoice choose_sync(const graph::Op& op, const graph::ParamSpec& param, std::int64_t samples_per_rank, int ranks,
                       const LinkSpec& link, const DeviceSpec& device, double bucket_bytes) {
  auto best = sync_cost(SyncMethod::kAllReduce, op, param, samples_per_rank, ranks, link, device);
  if (ranks <= 1) return best;
  const double bytes = static_cast<double>(param.bytes());
  double best_s = bucket_bytes > 0 && bytes <= bucket_bytes ? best.bytes / link.bandwidth : best.seconds;
  auto ps = sync_cost(SyncMethod::kPs, op, param, samples_per_rank, ranks, link, device);
  if (ps.seconds < best_s) best = ps, best_s = ps.seconds;
  if (sfb_shape(op, param)) {
    auto sfb = sync_cost(SyncMethod::kSfb, op, param, samples_per_rank, ranks, link, device);
    if (sfb.seconds < best_s) best = sfb;
  }
  return best;
}

}  // namespace trident::cost
