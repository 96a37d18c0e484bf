// Discrete-event simulation of one training iteration: every stage runs its
// schedule's actions in order, each as soon as the device is free and its
// inputs (or output gradients) have arrived; transfers queue on their edge's
// channel; after its last backward a stage syncs gradients (WFBP: each task
// may start once its gradient is ready in that backward), waits for its
// sends, then takes its optimizer step; the iteration ends with the loss
// all-reduce (StageGraph::step_s) once every stage is done. Where processes
// share a node's cores, busy stages slow each other (see Note [Shared cores]).
// The plan's predictions and `trident simulate` come from here.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/schedule/schedule.h"

namespace trident::schedule {

struct SimEvent {
  enum class Lane { kCompute, kSend, kSync };
  StageId stage = 0;
  Lane lane = Lane::kCompute;
  std::string name;  // "F3", "B3", "W3", "send F3 -> s2", "sync fc.weight"
  int micro_batch = -1;
  double start = 0, end = 0;
};

struct SimResult {
  double iteration_s = 0;
  double samples_per_s = 0;
  double bubble_fraction = 0;  // idle share of all devices' time
  int depth = 0;
  std::vector<double> busy_s;             // compute time per stage
  std::vector<double> utilisation;        // busy / iteration, per stage
  std::vector<double> peak_memory_bytes;  // per replica, per stage
  std::vector<int> in_flight;
  std::vector<SimEvent> events;
};

// Validates first (ScheduleError on a bad schedule).
SimResult simulate(const StageGraph& graph, const Schedule& schedule, int mini_batch);

// Chrome trace format (chrome://tracing, Perfetto): one process per stage,
// threads for compute, sends and gradient sync; times in microseconds.
nlohmann::json chrome_trace(const StageGraph& graph, const SimResult& result);

}  // namespace trident::schedule
