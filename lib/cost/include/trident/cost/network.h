// Communication costs: point-to-point transfers and the three gradient-sync
// schemes of Poseidon (docs/algorithms.md §1), priced as trident's runtime
// runs them on Gloo.
//
// Byte counts are per rank and per iteration, counting one direction (what a
// rank sends; with full-duplex links it receives as much), so a link of
// bandwidth β moves them in bytes/β seconds:
//   ring all-reduce   2·S·(P−1)/P                 (S = tensor bytes)
//   colocated PS      2·S·(P−1)/P   every replica serves 1/P of the tensor:
//                                    it pushes P−1 blocks and pulls P−1
//                                    (see Note [Sharded parameter server])
//   SFB               K·(P−1)·(M+N)·e             (K rows per rank, e bytes
//                                    per element; sends its factors to P−1)
// Send + receive together are twice these, i.e. the table of docs/algorithms.md §1:
// 4MN(P−1)/P, 2MN(P1+P2−2)/P2 and 2K(P1−1)(M+N) floats.
// Time, by Gloo's algorithms (or measured, see Note [Measured links]): a ring
// all-reduce has 2(P−1) steps of S/P bytes; the PS's push and pull (an
// alltoall each) are P−1 such messages each, so it is priced as the
// all-reduce; SFB is two all-gathers of P−1 messages each.
//
// Note [Captured Linear layers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An ATen capture of nn.Linear on a batch of
// rows is the program t(W); addmm(b, x, that) (or mm(x, that) without a
// bias) over the op's one input — exactly the zoo's linear op, so SFB's
// factors (the input rows and the output gradient) are the op's input and
// output as they are for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trident/cost/cluster.h"
#include "trident/graph/op_graph.h"

namespace trident::cost {

enum class SyncMethod { kAllReduce, kPs, kSfb };
std::string to_string(SyncMethod m);                  // "allreduce" | "ps" | "sfb"
SyncMethod sync_method_from_string(const std::string& text);  // throws ClusterError naming the allowed
// The methods' names in SyncMethod order: allreduce, ps, sfb.
const std::vector<std::string>& sync_method_names();
// What a run or a plan request may ask for: a method, or "hybrid" (each
// tensor by the cheapest method, Poseidon's HybComm).
const std::vector<std::string>& grad_sync_names();

// Note [Measured links]
// ~~~~~~~~~~~~~~~~~~~~~
// A calibrated link prices every collective the runtime runs from its
// measured tables (`trident calibrate`: point-to-point, all-reduce,
// alltoall — the PS's push and pull — and all-gather — SFB's): on the
// 2-core machine Gloo's all-reduce of 256 KiB between two processes took
// 3.8 ms where two transfers of α + S/β predict 0.3 ms (docs/benchmarks.md).
// Between measured sizes times are linear; beyond the largest the rest goes
// at the link's bandwidth; a process count not measured scales the nearest
// measured one by the formula's ratio; an operation not measured keeps the
// α-β formula (the PS: the all-reduce's).
double p2p_s(const LinkSpec& link, double bytes);

double allreduce_bytes(double tensor_bytes, int ranks);
// The sharded PS, per replica: (P−1)/P of the tensor pushed, as much pulled;
// push_scale < 1 when pushes move in a narrower dtype than the tensor's
// (0.5: bf16 pushes of fp32 gradients, see Note [Push dtype] in sync/grad_sync.h).
double ps_bytes(double tensor_bytes, int ranks, double push_scale = 1);
double sfb_bytes(std::int64_t rows_per_rank, std::int64_t m, std::int64_t n, std::int64_t element_bytes, int ranks);

double allreduce_s(const LinkSpec& link, double tensor_bytes, int ranks);
double ps_s(const LinkSpec& link, double tensor_bytes, int ranks, double push_scale = 1);
// Includes rebuilding ∇W = Σ δ aᵀ from all ranks' factors (one GEMM).
double sfb_s(const LinkSpec& link, const DeviceSpec& device, std::int64_t rows_per_rank, std::int64_t m,
             std::int64_t n, std::int64_t element_bytes, int ranks);

// The sufficient-factor shape of a parameter: a Linear weight [N, M] whose op
// sees `factor_rows_per_sample` rows per sample (e.g. sequence length) — the
// zoo's linear op, or an ATen-captured nn.Linear (see Note [Captured Linear
// layers] in cost/network.h).
struct SfbShape {
  std::int64_t m = 0, n = 0, factor_rows_per_sample = 1;
};
std::optional<SfbShape> sfb_shape(const graph::Op& op, const graph::ParamSpec& param);

struct SyncChoice {
  SyncMethod method = SyncMethod::kAllReduce;
  double seconds = 0;
  double bytes = 0;  // per rank per iteration, one direction
};

// What moves narrower than the parameter: PS pushes at `ps_push_scale` of
// its bytes (0.5: bf16 pushes of fp32 gradients, parallel.comm_dtype) and
// SFB factors at `factor_bytes` per element (2 under train.precision bf16;
// 0: the parameter's element size). See Note [Push dtype] in sync/grad_sync.h.
struct SyncWire {
  double ps_push_scale = 1;
  std::int64_t factor_bytes = 0;
};

// Predicted time and bytes of one method for one parameter.
SyncChoice sync_cost(SyncMethod method, const graph::Op& op, const graph::ParamSpec& param,
                     std::int64_t samples_per_rank, int ranks, const LinkSpec& link, const DeviceSpec& device,
                     const SyncWire& wire = {});

// HybComm: the cheapest of all-reduce, PS and (Linear weights only) SFB for
// one parameter synced by `ranks` replicas, each holding `samples_per_rank`
// samples per iteration. ranks == 1: no sync. PS moves what all-reduce
// moves but keeps only 1/P of the optimizer state per replica, so it wins
// where its time is within kPsMemoryTieBreak of all-reduce's; SFB must be
// strictly faster than the method chosen so far.
// With `bucket_bytes` > 0 gradients travel in buckets of that size (Note
// [Gradient buckets]; the PS packs its buckets the same way): a tensor that
// fits one joins it and pays only its bytes at the link's bandwidth, not
// another call's latency, so all-reduce and PS are weighed at that marginal
// cost (the returned choice keeps the tensor's own time). Without `sfb`
// (a split backward: Note [Split backward]) SFB is not considered.
inline constexpr double kPsMemoryTieBreak = 0.03;
SyncChoice choose_sync(const graph::Op& op, const graph::ParamSpec& param, std::int64_t samples_per_rank, int ranks,
                       const LinkSpec& link, const DeviceSpec& device, double bucket_bytes = 0,
                       const SyncWire& wire = {}, bool sfb = true);

}  // namespace trident::cost
