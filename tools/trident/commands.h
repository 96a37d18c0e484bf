// The `trident` subcommands. Each lives in its own file, <name>_command.cc,
// that holds both halves: add_<name>_command adds the subcommand and its
// options to the command line, and returns the body main() runs when the
// command line chose it. A body returns the exit code; an error it throws is
// printed as one line by main() and its kind decides the code (Note [Errors]
// in base/error.h).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "trident/graph/op_graph.h"
#include "trident/zoo/zoo.h"

namespace trident::cli {

struct Command {
  CLI::App* app = nullptr;   // the subcommand, as the command line parsed it
  std::function<int()> run;  // its body
};

Command add_train_command(CLI::App& app);
Command add_launch_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_simulate_command(CLI::App& app);
Command add_graph_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_profile_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_diff_command(CLI::App& app);
Command add_version_command(CLI::App& app);
Command add_data_command(CLI::App& app);

// --model (the zoo's names) and --preset, or --model-file (a user's model,
// docs/own-model.md), for every command that builds a model
// (model_options.cc).
void add_model_options(CLI::App* command, zoo::ModelSpec& model);
// The model's graph; a model file's graph names the model. Throws
// InputError when neither --model nor --model-file was given.
graph::OpGraph model_graph(zoo::ModelSpec& model);

}  // namespace trident::cli
