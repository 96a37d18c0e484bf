// Trace events of training (Chrome trace format, which Perfetto and
// chrome://tracing open). Every rank records spans — forward and backward of
// each micro-batch, waits for receives, gradient-sync work, the optimizer
// step — on the system clock, so the spans of processes on one machine line
// up; rank 0 merges them into runs/<name>/trace.json. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/plan/plan.h"

namespace trident::executor {

// Lanes are rows of a rank in the timeline.
inline constexpr int kComputeLane = 0;
inline constexpr int kCommLane = 1;

struct TraceEvent {
  std::string name;  // "F3", "B3", "wait block1.cat", "allreduce bucket 0", "optimizer"
  std::string cat;   // forward | backward | wait | sync | optimizer | step
  int lane = kComputeLane;
  std::int64_t ts_us = 0, dur_us = 0;
};

std::int64_t now_us();  // microseconds on the system clock

// trace.json holds every rank's events of the last kTracedSteps steps: enough
// to see the steady state after warm-up, small enough to open in a browser.
inline constexpr int kTracedSteps = 4;

// Waits shorter than this are not recorded: a receive that was already
// complete still costs a few µs of bookkeeping, and thousands of such
// slivers would hide the waits that matter in the timeline.
inline constexpr std::int64_t kShortestTracedWaitUs = 50;

// Note [GPU spans]
// ~~~~~~~~~~~~~~~~
// On a GPU the host queues work and moves on long before
// the GPU runs it, so host times say when work was queued, not when it ran.
// There a DeviceClock keeps time for the compute lane: a stamp is a mark on
// the stream the work runs on (a CUDA event), and when the step ends the
// marks become system-clock times (Placement::clock(), placement.h). A
// receive's wait is then the time the stream stood waiting for it. The
// communication lane (gradient sync) keeps host times.
class DeviceClock {
 public:
  virtual ~DeviceClock() = default;
  // Marks this point of the device's current stream; returns its number,
  // counted from 0 after each times().
  virtual std::int64_t mark() = 0;
  // Waits for the device to pass every mark, and returns the system-clock
  // µs at which it passed each, by number.
  virtual std::vector<std::int64_t> times() = 0;
};

struct TraceLog {
  std::vector<TraceEvent> events;
  DeviceClock* device = nullptr;  // keeps the compute lane's time when set
  // Now, on the compute lane's clock: system-clock µs, or a device mark.
  std::int64_t stamp() { return device ? device->mark() : now_us(); }
  // A compute-lane span (a wait: only when at least kShortestTracedWaitUs)
  // between two stamps; with a device, timed when resolve() runs.
  void add_stamped(std::string name, std::string cat, std::int64_t start, std::int64_t end);
  // After the step: device marks become times (a no-op without a device).
  void resolve();
  void add(std::string name, std::string cat, int lane, std::int64_t start_us, std::int64_t end_us) {
    events.push_back({std::move(name), std::move(cat), lane, start_us, end_us - start_us});
  }
  // A "wait" span on the compute lane, when at least kShortestTracedWaitUs.
  void add_wait(std::string name, std::int64_t start_us, std::int64_t end_us) {
    if (end_us - start_us >= kShortestTracedWaitUs) add(std::move(name), "wait", kComputeLane, start_us, end_us);
  }

 private:
  // A compute-lane span in system-clock µs; empty ones are dropped.
  void add_timed(std::string name, std::string cat, std::int64_t start_us, std::int64_t end_us);
  struct Marked {
    std::string name, cat;
    std::int64_t start = 0, end = 0;  // device marks
  };
  std::vector<Marked> marked_;
};

nlohmann::json to_json(const std::vector<TraceEvent>& events);
std::vector<TraceEvent> events_from_json(const nlohmann::json& doc);

// One Chrome trace of every rank's events: pid = rank (named by `labels`,
// e.g. "rank 2 · stage 1"), tid = lane, timestamps from the earliest event.
// `meta` goes into the trace's "metadata" (the plan's predictions, ...).
nlohmann::json chrome_trace(const std::vector<std::vector<TraceEvent>>& ranks, const std::vector<std::string>& labels,
                            const nlohmann::json& meta);

// The Chrome trace of every rank's events (`per_rank[r]` = to_json(...).dump()),
// each rank labelled with its stage and replica in `plan` (when given).
nlohmann::json merged_trace(const std::vector<std::string>& per_rank, const plan::Plan* plan, nlohmann::json meta);

}  // namespace trident::executor
