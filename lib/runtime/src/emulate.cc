#include "trident/runtime/emulate.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>

#include "trident/base/files.h"
#include "trident/report/plan_tables.h"
#include "trident/process/process.h"
#include "trident/executor/stage_executor.h"
#include "trident/runtime/trainer.h"
#include "trident/zoo/zoo.h"

namespace trident::runtime {

config::TrainConfig emulated_config(config::TrainConfig config, const std::string& cluster, double dilation) {
  if (!(dilation >= 1 && dilation <= 1000))
    throw config::ConfigError("--dilation " + std::to_string(dilation) + ": allowed 1 to 1000");
  if (config.parallel.devices < 2)
    throw config::ConfigError("--emulate: parallel.devices = " + std::to_string(config.parallel.devices) +
                              "; emulation runs a graph pipeline on at least 2 processes");
  config.parallel.cluster = cluster;
  if (config.parallel.partitioner == "dp") config.parallel.partitioner = "graphpipe";
  return config;
}

namespace {

// The emulated steps and what they measured: the seconds (undilated) of the
// steps counted, and rank 0's trace events of the last traced steps.
struct TimedSteps {
  double measured_s = 0;
  int counted = 0;
  std::vector<executor::TraceEvent> events;
};

// Every rank meets the others before the first step and after each step
// (as the trainer's per-step all-reduce of the loss); a delayed pipeline's
// steps meet at no barrier (the trainer lags its loss sums), and its steady
// state is the time between step ends, the first (filling) and the last
// (draining) left out (See Note [Delayed pipelines]).
TimedSteps emulate_steps(executor::StageExecutor& stage, comm::Group& group, const plan::Plan& plan, int steps,
                         double dilation, const config::TrainLoopConfig& train) {
  const auto rank = group.rank();
  auto barrier = [&] {
    auto t = torch::zeros({1});
    std::vector<at::Tensor> v{t};
    try {
      group.pg().allreduce(v)->wait(group.timeout());
    } catch (const std::exception& e) {
      const auto lost = group.diagnose();
      ErrorContext where;
      where.rank = rank, where.action = "emulation step barrier";
      throw comm::CommError("the ranks did not all finish the step" + (lost.empty() ? "" : " (" + lost + ")") + ": " +
                                first_line(e),
                            ErrorKind::kFailure, where);
    }
  };
  const bool delayed = plan.pipeline_delay > 0;
  TimedSteps out;
  barrier();
  for (int s = 0; s < steps; ++s) {
    executor::TraceLog trace;
    const auto start = executor::now_us();
    stage.set_random_key(static_cast<std::uint64_t>(train.seed), s);  // the step: a delayed pipeline's tags hold its parity
    stage.set_drain(s + 1 == steps);
    stage.run({}, static_cast<double>(train.mini_batch), {}, &trace);
    if (!delayed) barrier();
    const auto end = executor::now_us();
    trace.add("step " + std::to_string(s), "step", executor::kCommLane, start, end);
    if (s > 0 && (!delayed || s + 1 < steps)) out.measured_s += static_cast<double>(end - start) / 1e6 / dilation, ++out.counted;
    if (s >= steps - executor::kTracedSteps) out.events.insert(out.events.end(), trace.events.begin(), trace.events.end());
  }
  if (delayed) barrier();
  return out;
}

}  // namespace

EmulationResult run_emulation(config::TrainConfig config, const std::string& cluster, double dilation, std::ostream& out) {
  config = emulated_config(std::move(config), cluster, dilation);
  process::configure_process(1);  // emulated compute needs no threads; idle ones would only compete for the cores
  const auto graph = zoo::build_graph(config.model);
  auto planned = plan_for(config, graph);
  const auto world = comm::world_from_env();
  const bool leader = world.rank == 0;
  const auto run_dir = (std::filesystem::path(config.runs_dir) / config.name).string();
  if (leader) {
    std::filesystem::create_directories(run_dir);
    out << planned.table;
    write_file_atomic(run_dir + "/plan.json", planned.plan.to_json().dump(1) + "\n");
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.parallel.timeout_s * 1000));
  auto group = comm::Group::connect(world, timeout);
  executor::StageExecutor stage(graph, planned.plan, group, executor::Emulation{planned.costs, dilation});
  const int steps = static_cast<int>(config.train.steps ? config.train.steps : 20);
  if (leader)
    out << "trident: emulating " << config.model.name << "/" << config.model.preset << " on " << world.world_size
        << " processes as " << cluster << " devices, " << planned.plan.partitioner << " plan of "
        << planned.plan.stages.size() << " stages, " << report::micro_batch_summary(planned.plan) << ", "
        << planned.plan.schedule << "; " << steps << " iterations"
        << (dilation > 1 ? ", modelled times x" + std::to_string(static_cast<int>(dilation)) : std::string()) << std::endl;
  const auto timed = emulate_steps(stage, group, planned.plan, steps, dilation, config.train);
  const auto& events = timed.events;
  EmulationResult result;
  result.steps = std::max(1, timed.counted);
  result.iteration_s = timed.counted ? timed.measured_s / timed.counted : 0;
  result.predicted_iteration_s = planned.plan.predicted.iteration_s;
  const auto all = comm::allgather_strings(group, to_json(events).dump(), "gathering the emulated trace");
  if (leader) {
    nlohmann::json meta{{"model", config.model.name + "/" + config.model.preset},
                        {"steps", std::min(steps, executor::kTracedSteps)},
                        {"mini_batch", config.train.mini_batch},
                        {"emulated", cluster},
                        {"dilation", dilation}};
    write_file_atomic(run_dir + "/trace.json", executor::merged_trace(all, &planned.plan, meta).dump() + "\n");
    const nlohmann::json line{{"emulated", cluster},
                              {"dilation", dilation},
                              {"steps", result.steps},
                              {"iteration_s", result.iteration_s},
                              {"predicted_iteration_s", result.predicted_iteration_s},
                              {"samples_per_s", config.train.mini_batch / result.iteration_s},
                              {"predicted_samples_per_s", planned.plan.predicted.samples_per_s}};
    write_file_atomic(run_dir + "/metrics.jsonl", line.dump() + "\n");
    out << std::fixed << std::setprecision(2) << "emulated iteration " << result.iteration_s * 1e3
        << " ms (mean of " << result.steps << "), simulated " << result.predicted_iteration_s * 1e3
        << " ms: measured/simulated " << std::setprecision(3) << result.iteration_s / result.predicted_iteration_s
        << "; " << std::setprecision(1) << config.train.mini_batch / result.iteration_s << " samples/s; run dir "
        << run_dir << std::endl;
  }
  return result;
}

}  // namespace trident::runtime
