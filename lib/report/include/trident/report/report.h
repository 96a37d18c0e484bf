// The report of a training run (`trident report RUN_DIR`), from the files
// the trainer writes: trace.json (every rank's spans of the last steps),
// metrics.jsonl (loss, accuracy, throughput) and plan.json (the stages and
// the simulator's predictions). Torch-free: it reads files and makes text.
//
// Measured from the trace, over the traced steps:
//   iteration_s      mean wall time of a step (rank 0's "step" spans)
//   bubble_fraction  1 − (forward + backward + W time of all ranks) /
//                    (ranks × iteration): the share of device time spent
//                    neither forwarding nor backwarding (waiting, syncing,
//                    the optimizer, idle), as in the simulator's figure
//   exposed_comm_s   per step and rank, time compute waited on
//                    communication (receives, gradient sync)
// From metrics.jsonl's memory line, per stage: the largest peak resident
// memory of its ranks beside the plan's memory per device (weights,
// gradients, optimizer state, in-flight activations; the process's own
// base — LibTorch, data — comes on top).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"
#include "trident/plan/plan.h"
#include "trident/schedule/simulator.h"

namespace trident::report {

// A run directory that lacks a file or holds a malformed one; the message
// names the path and what is wrong.
using ReportError = ComponentError<struct ReportErrorTag, ErrorKind::kBadInput>;

struct StageMemory {
  int stage = -1;               // -1: ranks the plan leaves idle
  std::vector<int> ranks;
  double peak_rss_bytes = 0;    // the largest of its ranks'
  std::optional<double> peak_gpu_bytes;  // the same on their GPUs (GPU runs)
  double planned_bytes = 0;
};

struct Summary {
  int ranks = 0, steps = 0;
  int mini_batch = 0;
  double iteration_s = 0, bubble_fraction = 0, exposed_comm_s = 0, samples_per_s = 0;
  std::optional<double> predicted_iteration_s, predicted_samples_per_s, predicted_bubble_fraction;
  std::optional<double> test_accuracy;
  std::vector<StageMemory> memory;  // by stage; empty when the run recorded none
  // The loader (docs/data.md): rank 0's mean wait for its batch per step,
  // the samples one worker decodes per second, samples replaced as bad.
  std::optional<double> data_wait_s, data_samples_per_worker_s;
  double bad_samples = 0;
};

Summary summarize(const nlohmann::json& trace, const std::vector<nlohmann::json>& metrics);
std::string summary_text(const Summary& s);

// One row per rank (two lanes: compute, communication) over the last
// `steps` traced steps, forward blue, backward green, W of a split backward
// purple, waits red, gradient sync orange, optimizer grey — like the
// pipeline figures of GraphPipe.
std::string timeline_svg(const nlohmann::json& trace, int steps = 2);
// Training loss per logged window and test accuracy per evaluation.
std::string loss_svg(const std::vector<nlohmann::json>& metrics);
// The simulator's iteration in the trace format `trident train` writes, for
// timeline_svg beside the measured one: each stage on the row of its first
// device's rank, sends and gradient sync on the second lane, the iteration
// as one step.
nlohmann::json simulated_trace(const schedule::SimResult& result, const plan::Plan& plan);
// A page with the summary, the measured and (if given) simulated timelines,
// the loss curve and the stage graph (`stages_svg` may be empty).
std::string report_html(const Summary& s, const std::string& timeline, const std::string& loss,
                        const std::string& stages_svg, const std::string& simulated_timeline = "");

// Readers; throw ReportError naming the path.
nlohmann::json read_json(const std::string& path);
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace trident::report
