// Calibration (`trident calibrate`): measures the machine it runs on and
// writes a cluster file that `parallel.cluster: auto` (and `--cluster auto`)
// plan and predict with.
//
// Note [Calibration]
// ~~~~~~~~~~~~~~~~~~
// What the simulator needs to predict an iteration here, each measured:
// - per-op compute: the profiler (see Note [Whole-graph normalisation]) for each
//   model, at several row counts and at each thread count a run may use
//   (1 and the cores), kept as profiles "model/preset/threads"; on a CPU
//   that multiplies bf16 (AVX512-BF16, AMX) each again under the bf16
//   policy, kept as "model/preset/threads/bf16", which bf16 runs plan with;
// - Gloo between local processes, as training meets it (each call after
//   1 ms of computing; the mean, stalls included; smoothed to grow with
//   size): one-way point-to-point, all-reduce, alltoall and all-gather
//   times on 2..N processes at several message sizes, kept as tables (Note
//   [Measured links] in cost/network.h), with α and β fitted for the formulas;
// - the cores, and the work k single-threaded processes running a model's
//   training passes at once get done together, per model (see Note [Core
//   throughput] in cost/cluster.h), kept in its profiles;
// - the optimizer step's cost per tensor and per byte (fitted to Adam on a
//   few large and many small tensors), and one core's matrix-multiply rate
//   in fp32 and in bf16 (with the ISA oneDNN runs), for the analytic model
//   of ops no profile covers.
// Communication and sharing run in worker processes (`trident calibrate
// --worker`), started by the caller's launcher.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/cost/cluster.h"
#include "trident/zoo/zoo.h"

namespace trident::measure {

struct CalibrateOptions {
  std::vector<zoo::ModelSpec> models;                    // default: every zoo model, tiny preset
  std::vector<std::int64_t> rows{1, 4, 16, 32, 64, 128, 256};  // per-op profile row counts
  std::vector<int> threads;                              // default: 1 and the cores
  int max_processes = 0;  // collectives and sharing on 2..this many (default: cores + 2, at least 5, at most 8)
  int repeats = 3;
};

// Runs `args` (a trident subcommand and its flags) on `nproc` local worker
// processes and returns their exit code; the CLI passes its launcher.
using RunWorkers = std::function<int(int nproc, const std::vector<std::string>& args)>;

// Measures everything of Note [Calibration] and returns the cluster
// ("auto", one node of this machine's cores). Progress goes to `out`.
// Throws InputError for bad options, Failure when a measurement fails.
cost::ClusterSpec calibrate(const CalibrateOptions& options, const RunWorkers& run_workers, std::ostream& out);

// One worker of a communication or sharing measurement, inside a launched
// job: `what` is "links" (ping-pong when 2 processes, and all-reduce) or
// "sharing" (every rank runs training passes of the one model in `models` at
// once, see Note [Sharing workload]). Rank 0 writes its
// figures as JSON to `out_path`.
void calibration_worker(const std::string& what, const std::string& out_path, int repeats,
                        const std::vector<zoo::ModelSpec>& models);

}  // namespace trident::measure
