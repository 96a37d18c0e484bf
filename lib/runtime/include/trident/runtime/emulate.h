// `trident train --emulate CLUSTER`: the config's model (any preset, e.g.
// paper) as a graph pipeline planned for CLUSTER on parallel.devices local
// processes, run for train.steps iterations with modelled durations (Note
// [Emulation] in stage_executor.h): the real runtime — processes, schedule,
// p2p, replica synchronisation, one all-reduce per step as in training —
// without weights or data. Rank 0 writes runs/<name>/{plan.json,
// trace.json, metrics.jsonl} and prints the measured iteration time beside
// the simulator's prediction for the same plan.
#pragma once

#include <iosfwd>
#include <string>

#include "trident/config/config.h"

namespace trident::runtime {

struct EmulationResult {
  int steps = 0;                    // measured: all but the first
  double iteration_s = 0;           // mean measured iteration
  double predicted_iteration_s = 0; // the simulator's, same plan and costs
};

// The config an emulated run plans with: parallel.cluster = CLUSTER, and
// partitioner dp becomes graphpipe. Throws ConfigError for a dilation
// outside 1..1000 or fewer than 2 devices (`trident train` checks it before
// starting processes).
config::TrainConfig emulated_config(config::TrainConfig config, const std::string& cluster, double dilation);

// `dilation` >= 1 stretches every modelled time (see Emulation); the
// measured figures are divided by it.
EmulationResult run_emulation(config::TrainConfig config, const std::string& cluster, double dilation, std::ostream& out);

}  // namespace trident::runtime
