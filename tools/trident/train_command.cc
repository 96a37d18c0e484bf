// `trident train`: a config trained on this process, or launched on several
// (the launcher around it restarts, re-plans for fewer devices, or emulates).
#include "commands.h"

#include <csignal>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "launch.h"
#include "trident/base/error.h"
#include "trident/base/test_hooks.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/comm/world.h"
#include "trident/config/config.h"
#include "trident/process/blas.h"
#include "trident/runtime/emulate.h"
#include "trident/runtime/trainer.h"
#include "trident/zoo/zoo.h"

namespace trident::cli {
namespace {

struct TrainArgs {
  std::string config_path, resume_dir, emulate;
  std::vector<std::string> sets;
  int nproc = 0;
  double dilation = 1;
  int max_restarts = 0;
  int min_devices = 0;
};


// A worker the launcher started again (TRIDENT_RESTART_COUNT > 0, see
// launch.h) continues its run from the newest complete checkpoint, or starts
// it over when there is none yet; returns the run directory to resume, or "".
std::string restart_resume_dir(const config::TrainConfig& config) {
  const auto world = comm::world_from_env();
  const int count = world.restart_count;
  if (count == 0) return "";
  const auto run_dir = (std::filesystem::path(config.runs_dir) / config.name).string();
  const bool leader = world.rank == 0;
  try {
    const auto ck = checkpoint::CheckpointReader::latest(run_dir);
    if (leader) std::cout << "restart " << count << ": continuing from the checkpoint of step " << ck.step() << "\n";
    return run_dir;
  } catch (const checkpoint::CheckpointError&) {
    if (leader) std::cout << "restart " << count << ": " << run_dir << " has no complete checkpoint yet; starting over\n";
    return "";
  }
}


// Fault injection for the elastic tests: TRIDENT_TEST_SLOT_DOWN=S:K makes
// the worker on slot S (LOCAL_RANK) fail before it starts from the
// launcher's K-th restart on, as if its device were gone.
void fail_if_slot_down(const comm::WorldInfo& world) {
  const auto hook = test_hooks::slot_down();  // See Note [Test hooks]
  if (hook && world.local_rank == hook->rank && world.restart_count >= hook->value)
    throw Failure("slot " + std::to_string(hook->rank) + " cannot start a worker (TRIDENT_TEST_SLOT_DOWN)");
}


// The config as given (path and --set overrides), re-planned for `devices`
// (see Note [Elastic re-planning] in runtime/trainer.h). Throws ConfigError.
config::TrainConfig replanned_config(const config::TrainConfig& config, const std::string& path,
                                      std::vector<std::string> sets, int devices) {
  const auto extra = runtime::replan_overrides(config, devices);
  sets.insert(sets.end(), extra.begin(), extra.end());
  return config::load_config(path, sets);
}


// See Note [Elastic re-planning] in runtime/trainer.h: a worker that a launcher
// with --min-devices started among fewer workers than parallel.devices runs
// the config re-planned for them.
config::TrainConfig elastic_config(config::TrainConfig config, const std::string& path,
                                    const std::vector<std::string>& sets, const comm::WorldInfo& world) {
  if (world.min_devices == 0 || world.world_size >= config.parallel.devices) return config;
  config::TrainConfig replanned;
  try {
    replanned = replanned_config(config, path, sets, world.world_size);
  } catch (const config::ConfigError& e) {
    throw config::ConfigError("elastic: re-planning for the " + std::to_string(world.world_size) +
                               " devices that started: " + e.what());
  }
  if (world.rank == 0)
    std::cout << "elastic: " << world.world_size << " of the " << config.parallel.devices
              << " devices of the config started (--min-devices " << world.min_devices
              << "); re-planning with partitioner " << replanned.parallel.partitioner << " for "
              << world.world_size << ", mini-batch " << config.train.mini_batch << " as before\n";
  return replanned;
}


// For the launcher (LaunchOptions::devices_for): the most devices, from
// `left` down to `fewest`, that the config can be re-planned for (data
// parallelism needs a count that divides the mini-batch); 0 when none.
int plannable_devices(const config::TrainConfig& config, const std::string& path,
                      const std::vector<std::string>& sets, int left, int fewest) {
  for (int d = left; d >= fewest; --d) {
    try {
      const auto c = replanned_config(config, path, sets, d);
      runtime::plan_for(c, zoo::build_graph(c.model));
      return d;
    } catch (const config::ConfigError&) {
    }
  }
  return 0;
}


int train(const TrainArgs& a) {
  const auto& [config_path, given_resume_dir, emulate, given_sets, nproc, dilation, max_restarts, min_devices] = a;
  auto sets = given_sets;
  std::string path = config_path, resume_dir = given_resume_dir;
  if (!resume_dir.empty() && path.empty()) path = resume_dir + "/config.yaml";
  if (path.empty()) throw config::ConfigError("train: give --config FILE, or --resume RUN_DIR");
  if (nproc < 0) throw config::ConfigError("train: --nproc " + std::to_string(nproc) + " must be >= 1");
  if (max_restarts < 0)
    throw config::ConfigError("train: --max-restarts " + std::to_string(max_restarts) + " must be >= 0");
  if (max_restarts > 0 && !emulate.empty()) throw config::ConfigError("train: --max-restarts does not apply to --emulate");
  if (min_devices != 0 && max_restarts == 0)
    throw config::ConfigError("train: --min-devices " + std::to_string(min_devices) +
                               " needs --max-restarts >= 1: going on with fewer devices starts the workers again");
  if (nproc > 0) sets.push_back("parallel.devices=" + std::to_string(nproc));
  if (emulate.empty() && dilation != 1) throw config::ConfigError("train: --dilation applies only with --emulate CLUSTER");
  auto config = config::load_config(path, sets);
  if (!resume_dir.empty() && !std::filesystem::is_directory(resume_dir))
    throw config::ConfigError("--resume " + resume_dir + ": no such run directory");
  // Several processes (or restarts) without a launcher around us: check, then become the launcher.
  if ((config.parallel.devices > 1 || max_restarts > 0) && comm::world_from_env().launcher == "none") {
    if (!emulate.empty()) {
      const auto checked = runtime::emulated_config(config, emulate, dilation);
      runtime::plan_for(checked, zoo::build_graph(checked.model));
    } else {
      runtime::plan_for(config, zoo::build_graph(config.model));
    }
    cli::LaunchOptions lo;
    lo.nproc = static_cast<int>(config.parallel.devices);
    lo.max_restarts = max_restarts;
    lo.min_devices = min_devices;
    lo.devices_for = [config, path, sets, min_devices](int left) {
      return plannable_devices(config, path, sets, left, min_devices);
    };
    lo.args = {"train", "--config", path};
    for (const auto& s : sets) lo.args.push_back("--set"), lo.args.push_back(s);
    if (!resume_dir.empty()) lo.args.push_back("--resume"), lo.args.push_back(resume_dir);
    if (!emulate.empty()) lo.args.push_back("--emulate"), lo.args.push_back(emulate);
    if (dilation != 1) lo.args.push_back("--dilation"), lo.args.push_back(std::to_string(dilation));
    return cli::launch(lo);
  }
  if (!emulate.empty()) {
    runtime::run_emulation(config, emulate, dilation, std::cout);
    return 0;
  }
  const auto world = comm::world_from_env();
  fail_if_slot_down(world);
  config = elastic_config(std::move(config), path, sets, world);
  if (resume_dir.empty()) resume_dir = restart_resume_dir(config);
  if (!resume_dir.empty()) {
    // The run directory decides where the checkpoint is, whatever the config says.
    std::filesystem::path dir(resume_dir);
    config.name = dir.filename().string();
    config.runs_dir = dir.parent_path().empty() ? "." : dir.parent_path().string();
  }
  runtime::Trainer trainer(config, !resume_dir.empty(), std::cout);
  if (auto warning = process::blas_warning(); !warning.empty() && trainer.leader()) std::cerr << warning << "\n";
  std::signal(SIGINT, [](int) { runtime::Trainer::stop_requested() = true; });
  std::signal(SIGTERM, [](int) { runtime::Trainer::stop_requested() = true; });
  auto result = trainer.run();
  if (result.interrupted) return kExitInterrupted;
  if (result.test_accuracy && trainer.leader()) {  // one rank reports (mpirun starts every rank alike)
    std::cout << "test accuracy: " << std::fixed << std::setprecision(2) << 100 * *result.test_accuracy << "%\n";
  }
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* c = app.add_subcommand("train", "train a model from a YAML config");
  c->add_option("--config", a->config_path, "config file (examples/*.yaml)");
  c->add_option("--set", a->sets, "override a config key: --set train.epochs=2 (repeatable)");
  c->add_option("--resume", a->resume_dir, "continue the run in RUN_DIR (e.g. runs/NAME) from its checkpoint");
  c->add_option("--dilation", a->dilation, "with --emulate: stretch every modelled time by this factor (1-1000); results are divided by it");
  c->add_option("--emulate", a->emulate, "run the pipeline planned for CLUSTER (e.g. summit-v100) with modelled compute and transfer times instead of training");
  c->add_option("--nproc", a->nproc, "data parallel on N local processes (sets parallel.devices=N and launches them)");
  c->add_option("--max-restarts", a->max_restarts,
                "when a worker fails, start all again from the newest complete checkpoint, at most N times");
  c->add_option("--min-devices", a->min_devices,
                "with --max-restarts: when a device's worker fails to start, re-plan for the devices left, down to M");
  return {c, [a] { return train(*a); }};
}

}  // namespace trident::cli
