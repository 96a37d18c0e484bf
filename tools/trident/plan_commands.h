// `trident plan` and `trident simulate` (DESIGN.md "Command line"): the
// torch-free planner behind the CLI. Errors are thrown (PlanError,
// ClusterError, ScheduleError, std::invalid_argument) and main() turns them
// into one line and exit code 2.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace trident::cli {

struct PlanArgs {
  std::string model, preset = "tiny", cluster = "cpu-local", partitioner = "graphpipe", schedule;
  std::string grad_sync = "hybrid", optimizer = "adam", profile, out, dot;
  int devices = 1, mini_batch = 0, micro_batch = 0, max_replicas = 0;
  double device_memory_gb = 0;
  int sync_rows = 12;
};

struct SimulateArgs {
  std::string plan, trace;
  bool json = false;
};

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);

int run_plan(const PlanArgs& args);
int run_simulate(const SimulateArgs& args);

// True for the planner's bad-input errors (exit 2).
bool is_plan_input_error(const std::exception& e);

}  // namespace trident::cli
