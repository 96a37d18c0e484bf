// GradSync: sums the gradients of a set of parameters over a process group,
// so that every member ends with the same gradient — the one single-process
// training on the whole global batch would compute (the loss is a sum over
// rows divided by the global batch; see Note [Loss scale] in executor.h).
//
// One interface for every strategy (docs/architecture.md, `comm`), on any group and any
// subset of a model's parameters, so pipeline stages reuse it for their
// replicas. Use per iteration:
//   sync.arm();        // before the backward that completes the gradients
//   loss.backward();   // hooks start communication as gradients become ready (WFBP)
//   sync.finish();     // waits for all of it; gradients are now summed
//
// Note [Deterministic communication order]: every rank launches its
// collectives in the same order (bucket index order), never in the order its
// gradients happen to become ready, which could differ between ranks and hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "trident/graph/op_graph.h"

#include "trident/comm/group.h"

namespace trident::comm {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// All-reduce bucket size when none is given (config parallel.bucket_mb):
// PyTorch DDP's default, large enough that per-message latency is small
// against the bytes, small enough that the first bucket starts early in
// backward.
inline constexpr std::int64_t kDefaultBucketBytes = std::int64_t{25} << 20;

// One communication span, for traces and the exposed-communication figure.
struct SyncEvent {
  std::string name;  // "allreduce bucket 3"
  double start_s = 0, end_s = 0;  // seconds on the steady clock since the iteration's arm()
};

struct SyncStats {
  // Per parameter, bytes this rank sent / received in the last iteration,
  // by the algorithm's formula (cost/comm.h).
  std::map<std::string, double> sent, received;
  std::vector<SyncEvent> events;
  double backward_end_s = 0;   // finish() was called (backward done)
  double exposed_s = 0;        // from the end of backward to the end of the last sync
};

class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual void arm() = 0;
  virtual void finish() = 0;
  // The optimizer step: calls `update` for the parameters this rank updates
  // and leaves every rank's parameters equal. All strategies but PS update
  // every parameter locally; under PS each rank updates the parameters it
  // owns (so optimizer state lives only on the owner) and broadcasts them.
  using Update = std::function<void(const std::string& name, torch::Tensor& param, const torch::Tensor& grad)>;
  virtual void apply(const Update& update) = 0;
  // Who applies the optimizer to parameter `name` (and so holds its
  // optimizer state): every member, or one member — this one or another.
  enum class Updater { kEvery, kThisRank, kOtherRank };
  virtual Updater updater(const std::string& name) const {
    (void)name;
    return Updater::kEvery;
  }
  // An observer for the executors that run this model's ops (SFB captures
  // Linear layers' inputs and output gradients); empty when not needed.
  using OpObserver = std::function<void(graph::OpId, const std::vector<torch::Tensor>&, const torch::Tensor&)>;
  virtual OpObserver observer() { return {}; }
  // Waits for anything still in flight (PS pulls under staleness > 0), so
  // every rank holds the same parameters; before a checkpoint and at the end.
  virtual void flush() {}
  virtual const SyncStats& stats() const = 0;
  virtual std::string name() const = 0;
};

// Bucketed ring all-reduce with WFBP: parameters are packed in reverse order
// into buckets of at most `bucket_bytes` (a parameter larger than that gets
// its own); a bucket's async all-reduce starts once all its gradients are
// accumulated (AccumulateGrad post-hooks) and every earlier bucket has
// started. `wfbp = false` starts everything in finish() instead (the
// baseline WFBP is measured against).
std::unique_ptr<GradSync> make_allreduce_sync(Group group, NamedParams params,
                                              std::int64_t bucket_bytes = kDefaultBucketBytes, bool wfbp = true);

// Colocated sharded parameter server (Poseidon): every parameter has an
// owner rank (bytes balanced greedily, largest first); push = reduce of the
// gradient to the owner, started by the same WFBP hooks; the owner applies
// the optimizer; pull = broadcast from the owner.
//
// Note [Staleness]: with staleness 0 (BSP) every pull is waited for at the
// end of its iteration. With staleness s > 0 a rank does not wait: the pull of
// iteration t is applied at the end of iteration t + s, so a rank computes
// with parameters that lack the other owners' last s updates (it runs up to
// s iterations ahead of them). Unlike Poseidon's SSP, where how stale a read
// is depends on timing, the delay here is always exactly s, so runs are
// reproducible; they differ from BSP. flush() applies what is pending.
std::unique_ptr<GradSync> make_ps_sync(Group group, NamedParams params, int staleness = 0);
// The owner of each parameter under make_ps_sync, by index.
std::vector<int> ps_owners(const NamedParams& params, int ranks);

// Sufficient-factor broadcasting for Linear weights (every parameter given
// must be one, in `graph`): the layer's inputs a_k and output gradients
// δ_k of every row are captured (attach observer() to the executor),
// all-gathered when the last backward produces them, and ∇W = Σ_k δ_k a_kᵀ
// is rebuilt with one GEMM on every rank. Throws CommError naming a
// parameter that is not a Linear weight.
std::unique_ptr<GradSync> make_sfb_sync(Group group, NamedParams params, const graph::OpGraph& graph);

// Each parameter by its own method ("allreduce", "ps" or "sfb"; missing =
// allreduce), each method on its own subgroup of the same ranks so their
// collectives never interleave. Every member calls it with the same methods.
std::unique_ptr<GradSync> make_hybrid_sync(Group group, NamedParams params, const graph::OpGraph& graph,
                                           const std::map<std::string, std::string>& methods,
                                           std::int64_t bucket_bytes = kDefaultBucketBytes, int staleness = 0);

}  // namespace trident::comm
