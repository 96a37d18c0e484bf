// Where a process's time goes, op by op: the self time of every LibTorch op
// (`aten::addmm`, an autograd node such as `AddmmBackward0`, ...) run while
// an OpProfile is counting, on every thread of the process.
//
// Note [Op self time]
// ~~~~~~~~~~~~~~~~~~~
// LibTorch announces every op it dispatches, and every
// autograd node it runs, through its RecordFunction callbacks. While counting,
// a callback times each one and subtracts the time of the ops it called, so
// an op's self time is the time spent in it and not in an op below it (the
// measure torch.profiler's `self_cpu_time_total` reports, so the two can be
// set side by side). Time outside every op — trident's own code, waits for a
// neighbour, Gloo — is the step's wall time less the ops' sum. Counting adds
// two clock reads and a map update per op: a few percent on small ops.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace trident::nn {

struct OpTotals {
  double self_s = 0;        // seconds in the op itself
  std::int64_t calls = 0;
};

// Counts from construction to stop() (or destruction). At most one OpProfile
// counts at a time in a process; a second one throws std::logic_error.
class OpProfile {
 public:
  OpProfile();
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Stops counting; totals() and wall_s() then stay as they are. Idempotent.
  void stop();
  // Self time and calls of each op name counted so far.
  std::map<std::string, OpTotals> totals() const;
  // Seconds since construction, up to stop().
  double wall_s() const;

 private:
  std::uint64_t handle_ = 0;
  bool counting_ = true;
  std::chrono::steady_clock::time_point start_, end_;
};

}  // namespace trident::nn
