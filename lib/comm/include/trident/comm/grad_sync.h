// GradSync: sums the gradients of a set of parameters over a process group,
// so that every member ends with the same gradient — the one single-process
// training on the whole global batch would compute (the loss is a sum over
// rows divided by the global batch; see Note [Loss scale] in executor.h).
//
// One interface for every strategy (DESIGN.md `comm`), on any group and any
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
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "trident/comm/group.h"

namespace trident::comm {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

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
                                              std::int64_t bucket_bytes = 25 << 20, bool wfbp = true);

}  // namespace trident::comm
