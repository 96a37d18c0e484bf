// The `trident` command line: one subcommand per file (commands.h). Exit
// codes (see Note [Errors] in base/error.h, docs/design.md): kExitOk;
// kExitBadInput (config, flags, missing data) with one line naming the field,
// the value and what is allowed; kExitFailure while running; kExitInterrupted
// (a checkpoint was written first).
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "trident/base/error.h"
#include "trident/process/blas.h"
#include "trident/process/process.h"

namespace {

using namespace trident;

// The exit code of an error that escaped a command (see Note [Errors]).
template <class Run>
int guarded(Run&& run) {
  try {
    return run();
  } catch (const Error& e) {  // the kind decides the exit code
    std::cerr << "trident: " << first_line(e) << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {  // not anticipated: a failure
    std::cerr << "trident: " << first_line(e) << "\n";
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // See Note [CPU process settings], see Note [BLAS kernel]: only the commands that
  // compute pay the re-execution (a second load of LibTorch, ~0.6 s);
  // `version` re-executes only to show the kernel a run would get; `launch`
  // decides the kernel once and its workers inherit the decision.
  const std::string command = argc > 1 ? argv[1] : "";
  const int started = guarded([&] {
    if (command == "train" || command == "profile" || command == "calibrate") process::prepare_process(argv);
    if (command == "version" && process::choose_blas_kernel(argv)) process::reexecute(argv);
    if (command == "launch") process::choose_blas_kernel(argv);
    return 0;
  });
  if (started != 0) return started;
  CLI::App app{"trident: plan and train multi-branch DNNs (graph pipelines + Poseidon data parallelism)", "trident"};
  app.require_subcommand(1);
  const std::vector<cli::Command> commands = {
      cli::add_train_command(app),   cli::add_launch_command(app),    cli::add_graph_command(app),
      cli::add_profile_command(app), cli::add_calibrate_command(app), cli::add_report_command(app),
      cli::add_export_command(app),  cli::add_diff_command(app),      cli::add_plan_command(app),
      cli::add_simulate_command(app), cli::add_version_command(app), cli::add_data_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "trident: " << e.what() << " (see trident --help)\n";
    return kExitBadInput;
  }
  return guarded([&] {
    for (const auto& command : commands)
      if (*command.app) return command.run();
    return kExitOk;
  });
}
