// `trident plan` and `trident simulate` (docs/design.md, "The path of one run"): the
// torch-free planner behind the CLI. Errors are thrown as trident::Error
// (PlanError, ClusterError, ScheduleError, GraphError); main() prints one
// line and exits with the error's code.
#pragma once

#include "trident/planner/planner.h"

#include <string>

#include <CLI/CLI.hpp>

#include "trident/zoo/zoo.h"

namespace trident::cli {

struct PlanArgs {
  zoo::ModelSpec model;
  std::string cluster = "auto", partitioner = "graphpipe", schedule;
  std::string grad_sync = "hybrid", optimizer = "adam", profile, out, dot, recompute = "auto", precision = "fp32";
  std::string placement = "auto";
  int devices = 1, mini_batch = 0, micro_batch = 0, max_replicas = 0, micro_batch_ratio = 0;
  double device_memory_gb = 0;
  int sync_rows = 12;
};

struct SimulateArgs {
  std::string plan, trace;
  bool json = false;
};

// --model (the zoo's names) and --preset, or --model-file (a user's model,
// docs/own-model.md), for every command that builds a model.
void add_model_options(CLI::App* command, zoo::ModelSpec& model);
// The model's graph; a model file's graph names the model. Throws
// InputError when neither --model nor --model-file was given.
graph::OpGraph model_graph(zoo::ModelSpec& model);

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& args);

int run_plan(PlanArgs args);
int run_simulate(const SimulateArgs& args);

// A planner for a written plan (checked against `g`, its model's graph) on
// the cluster and cost model the plan records, to simulate it again.
// `origin` names the plan in errors.
planner::Planner planner_for(plan::Plan& plan, const graph::OpGraph& g, const std::string& origin);

}  // namespace trident::cli
