// The `trident` command line. Exit codes (docs/design.md, see Note [Errors] in base/error.h): 0 success; 2 bad input
// (config, flags, missing data) with one line naming the field, the value
// and what is allowed; 1 a failure while running; 130 interrupted (a
// checkpoint was written first).
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>

#include <torch/cuda.h>
#include <torch/version.h>

#include "graph_command.h"
#include "launch.h"
#include "plan_commands.h"
#include "report_command.h"
#include "trident/base/test_hooks.h"
#include "trident/base/error.h"
#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/comm/group.h"
#include "trident/comm/world.h"
#include "trident/process/blas.h"
#include "trident/measure/calibrate.h"
#include "trident/checkpoint/checkpoint_diff.h"
#include "trident/runtime/emulate.h"
#include "trident/executor/tensor_placement.h"
#include "trident/process/process.h"
#include "trident/measure/profiler.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/runtime/trainer.h"
#include "trident/zoo/zoo.h"

namespace {

using namespace trident;

constexpr int kBadInput = 2, kFailure = 1, kInterrupted = 130;

struct TrainArgs {
  std::string config_path, resume_dir, emulate;
  std::vector<std::string> sets;
  int nproc = 0;
  double dilation = 1;
  int max_restarts = 0;
  int min_devices = 0;
};

CLI::App* add_train_command(CLI::App& app, TrainArgs& a) {
  auto* c = app.add_subcommand("train", "train a model from a YAML config");
  c->add_option("--config", a.config_path, "config file (examples/*.yaml)");
  c->add_option("--set", a.sets, "override a config key: --set train.epochs=2 (repeatable)");
  c->add_option("--resume", a.resume_dir, "continue the run in RUN_DIR (e.g. runs/NAME) from its checkpoint");
  c->add_option("--dilation", a.dilation, "with --emulate: stretch every modelled time by this factor (1-1000); results are divided by it");
  c->add_option("--emulate", a.emulate, "run the pipeline planned for CLUSTER (e.g. summit-v100) with modelled compute and transfer times instead of training");
  c->add_option("--nproc", a.nproc, "data parallel on N local processes (sets parallel.devices=N and launches them)");
  c->add_option("--max-restarts", a.max_restarts,
                "when a worker fails, start all again from the newest complete checkpoint, at most N times");
  c->add_option("--min-devices", a.min_devices,
                "with --max-restarts: when a device's worker fails to start, re-plan for the devices left, down to M");
  return c;
}

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
  if (result.interrupted) return kInterrupted;
  if (result.test_accuracy && trainer.leader()) {  // one rank reports (mpirun starts every rank alike)
    std::cout << "test accuracy: " << std::fixed << std::setprecision(2) << 100 * *result.test_accuracy << "%\n";
  }
  return 0;
}

// `trident export RUN_DIR [--out FILE]`: the newest checkpoint's weights for plain PyTorch.
int export_run(const std::string& run_dir, std::string out) {
  if (!std::filesystem::is_directory(run_dir)) throw config::ConfigError("export: " + run_dir + " is not a run directory");
  checkpoint::CheckpointReader ck;
  try {
    ck = checkpoint::CheckpointReader::latest(run_dir);
  } catch (const checkpoint::CheckpointError& e) {
    throw config::ConfigError(std::string("export: ") + e.what());
  }
  if (out.empty()) out = (std::filesystem::path(run_dir) / "weights.pt").string();
  const auto n = checkpoint::export_weights(ck, out);
  std::cout << "exported " << n << " parameters of step " << ck.step() << " (" << ck.path() << ") to " << out
            << "; in Python: model.load_state_dict(torch.load('" << out << "'))\n";
  return 0;
}

// A run directory's newest checkpoint, or a checkpoint directory itself.
checkpoint::CheckpointReader checkpoint_at(const std::string& path) {
  if (!std::filesystem::exists(path)) throw InputError("diff: " + path + " does not exist");
  if (std::filesystem::exists(std::filesystem::path(path) / "manifest.json") ||
      std::filesystem::is_regular_file(path))
    return checkpoint::CheckpointReader::open(path);
  return checkpoint::CheckpointReader::latest(path);
}

// `trident diff A B`: 0 when the weights agree within the tolerances, 1 when
// they differ (as diff(1)); bad input is 2.
struct DiffArgs {
  std::string a, b;
  double rtol = 1e-5, atol = 1e-6;
  bool optimizer = false;
};

CLI::App* add_diff_command(CLI::App& app, DiffArgs& d) {
  auto* c = app.add_subcommand("diff", "compare two runs' newest checkpoints tensor by tensor (exit 0 equal, 1 different)");
  c->add_option("a", d.a, "a run directory or a checkpoint directory")->required();
  c->add_option("b", d.b, "the other")->required();
  c->add_option("--rtol", d.rtol, "relative tolerance (torch.allclose)");
  c->add_option("--atol", d.atol, "absolute tolerance (torch.allclose)");
  c->add_flag("--optimizer", d.optimizer, "compare the optimizer state too");
  return c;
}

int diff_runs(const DiffArgs& args) {
  const auto& [a, b, rtol, atol, with_optimizer] = args;
  const auto ca = checkpoint_at(a), cb = checkpoint_at(b);
  const auto d = checkpoint::diff_checkpoints(ca, cb, with_optimizer ? "" : "param/", rtol, atol);
  const auto list = [](const std::vector<std::string>& keys) {
    return join(std::vector<std::string>(keys.begin(), keys.begin() + std::min<std::size_t>(keys.size(), 5))) +
           (keys.size() > 5 ? ", ..." : "");
  };
  std::cout << "compared " << d.compared << " tensors of step " << ca.step() << " and step " << cb.step()
            << "; largest |a - b| = " << d.max_abs << (d.max_abs_key.empty() ? "" : " (" + d.max_abs_key + ")")
            << "\n";
  if (!d.only_a.empty()) std::cout << "only in " << a << ": " << list(d.only_a) << "\n";
  if (!d.only_b.empty()) std::cout << "only in " << b << ": " << list(d.only_b) << "\n";
  if (!d.shape_differs.empty()) std::cout << "shape or dtype differs: " << list(d.shape_differs) << "\n";
  if (!d.value_differs.empty())
    std::cout << d.value_differs.size() << " differ beyond rtol " << rtol << ", atol " << atol << ": "
              << list(d.value_differs) << "\n";
  std::cout << (d.equal() ? "equal" : "different") << "\n";
  return d.equal() ? 0 : 1;
}

struct ProfileArgs {
  zoo::ModelSpec model;
  std::string out, rows = "1,2,4,8", precision = "fp32";
  int repeats = 5, threads = 1;
};

int run_profile(ProfileArgs a) {
  cli::model_graph(a.model);  // names a missing model before measuring
  measure::ProfileOptions po;
  po.rows.clear();
  std::stringstream list(a.rows);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      po.rows.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw InputError("profile: --micro-batches '" + a.rows + "' must be integers like 1,2,4,8");
    }
  }
  po.repeats = a.repeats, po.threads = a.threads;
  po.precision = graph::precision_from_string(a.precision).value();  // checked by the option
  auto p = measure::profile_model(a.model, po);
  write_file_atomic(a.out, p.to_json().dump(1) + "\n");
  std::cout << "profiled " << p.ops.size() << " ops of " << a.model.name << "/" << a.model.preset << " at " << a.rows
            << " rows; wrote " << a.out << " (use: trident plan --profile " << a.out << " --cluster cpu-local ...)\n";
  return 0;
}

struct CalibrateArgs {
  std::string out, models, worker;
  int repeats = 3, max_processes = 0;
  bool if_missing = false;
};

int run_calibrate(const CalibrateArgs& a) {
  if (a.if_missing && std::filesystem::exists(a.out.empty() ? cost::calibration_path() : a.out)) {
    std::cout << "calibrate: this machine is calibrated (" << (a.out.empty() ? cost::calibration_path() : a.out)
              << "); run `trident calibrate` to measure it again\n";
    return 0;
  }
  measure::CalibrateOptions o;
  o.repeats = a.repeats, o.max_processes = a.max_processes;
  std::stringstream list(a.models);
  for (std::string item; std::getline(list, item, ',');) {
    const auto slash = item.find('/');
    zoo::ModelSpec m{item.substr(0, slash), slash == std::string::npos ? "tiny" : item.substr(slash + 1)};
    zoo::build_graph(m);  // names the unknown model or preset now, not after minutes of measuring
    o.models.push_back(m);
  }
  if (!a.worker.empty()) {
    measure::calibration_worker(a.worker, a.out, a.repeats, o.models);
    return 0;
  }
  auto run_workers = [](int nproc, const std::vector<std::string>& args) {
    cli::LaunchOptions lo;
    lo.nproc = nproc, lo.args = args;
    return cli::launch(lo);
  };
  const auto cluster = measure::calibrate(o, run_workers, std::cout);
  const auto path = a.out.empty() ? cost::calibration_path() : a.out;
  if (auto dir = std::filesystem::path(path).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
  write_file_atomic(path, cluster.to_json().dump(1) + "\n");
  std::cout << "wrote " << path << (a.out.empty() ? " (parallel.cluster: auto reads it)" : "") << "\n";
  return 0;
}

struct GraphArgs {
  zoo::ModelSpec model;
  std::string out;
  bool all_ops = false;
  int by_module = 0;
};

CLI::App* add_graph_command(CLI::App& app, GraphArgs& a) {
  auto* c = app.add_subcommand("graph", "summarise a model's operator graph; --out writes it as JSON");
  cli::add_model_options(c, a.model);
  c->add_option("--out", a.out, "write the graph JSON here");
  c->add_flag("--ops", a.all_ops, "print one line per op");
  c->add_option("--by-module", a.by_module,
                "print one line per submodule, cut to DEPTH dotted parts (a coarse view of a captured model)")
      ->check(CLI::PositiveNumber);
  return c;
}

CLI::App* add_launch_command(CLI::App& app, cli::LaunchOptions& o) {
  auto* c = app.add_subcommand("launch", "start N local workers of a trident subcommand: trident launch --nproc N -- train --config f.yaml");
  c->add_option("--nproc", o.nproc, "number of worker processes")->required();
  c->add_option("--master-port", o.master_port, "rendezvous port (default: a free one on 127.0.0.1)");
  c->add_option("--master-addr", o.master_addr, "the address rank 0's rendezvous is reached at (MASTER_ADDR; default 127.0.0.1)");
  c->add_option("--slot-command", o.slot_command,
                "run each worker through this shell command, {slot} replaced by its slot, e.g. 'numactl --cpunodebind={slot}'");
  c->add_option("--grace-s", o.grace_s, "after a worker fails, seconds the others get to exit before SIGKILL");
  c->add_option("--max-restarts", o.max_restarts,
                "when a worker fails, start all again (TRIDENT_RESTART_COUNT=k), at most N times");
  c->add_option("--min-devices", o.min_devices,
                "with --max-restarts: drop slots whose worker fails to start while M are left (TRIDENT_MIN_DEVICES)");
  c->add_option("args", o.args, "the subcommand and its flags, after --");
  return c;
}

CLI::App* add_profile_command(CLI::App& app, ProfileArgs& a) {
  auto* c = app.add_subcommand("profile", "measure each op's forward and backward time on this machine, for `trident plan --profile`");
  cli::add_model_options(c, a.model);
  c->add_option("--micro-batches", a.rows, "row counts to measure, ascending: 1,2,4,8");
  c->add_option("--repeats", a.repeats, "runs per op and row count (the median is kept)");
  c->add_option("--threads", a.threads, "threads, as in training");
  c->add_option("--precision", a.precision, "fp32 or bf16, as train.precision")->check(CLI::IsMember({"fp32", "bf16"}));
  c->add_option("--out", a.out, "write profile.json here")->required();
  return c;
}

CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& a) {
  auto* c = app.add_subcommand("calibrate", "measure this machine (op times, Gloo links, shared cores, optimizer) for parallel.cluster: auto");
  c->add_option("--out", a.out, "write the cluster file here (default: this machine's cache, read by `auto`)");
  c->add_option("--models", a.models, "models to profile, e.g. mlp,inception/tiny (default: every zoo model, tiny)");
  c->add_option("--repeats", a.repeats, "runs per measurement (the median is kept)");
  c->add_option("--max-processes", a.max_processes, "collectives and core sharing measured on 2..N processes (default: cores + 2, at least 5, at most 8)");
  c->add_flag("--if-missing", a.if_missing, "do nothing when this machine is already calibrated");
  c->add_option("--worker", a.worker, "internal: one worker of a measurement")->group("");
  return c;
}

struct RunDirArgs {
  std::string run_dir, out;
};

CLI::App* add_report_command(CLI::App& app, RunDirArgs& a) {
  auto* c = app.add_subcommand("report", "summarise a run: measured vs simulated iteration, bubble, timeline SVG, loss curve, stage graph");
  c->add_option("run_dir", a.run_dir, "the run directory, e.g. runs/fmnist-inception")->required();
  return c;
}

CLI::App* add_export_command(CLI::App& app, RunDirArgs& a) {
  auto* c = app.add_subcommand("export", "write a run's newest checkpoint as a PyTorch state_dict file (torch.load)");
  c->add_option("run_dir", a.run_dir, "the run directory, e.g. runs/fmnist-inception")->required();
  c->add_option("--out", a.out, "output file (default RUN_DIR/weights.pt)");
  return c;
}

// `trident version`: which LibTorch, which build, which backends, which GPUs.
int show_version() {
  std::cout << "trident " << TRIDENT_VERSION << ", LibTorch " << TORCH_VERSION << ", "
            << (executor::Placement::cuda_build() ? "CUDA" : "CPU") << " build; collectives: " << comm::backend_names();
  if (executor::Placement::cuda_build()) std::cout << "; CUDA devices visible: " << static_cast<int>(torch::cuda::device_count());
  std::cout << "\nBLAS: " << process::blas_in_use().describe() << "\n";
  std::cout << "ATen CPU kernels: " << process::aten_kernels() << "\n";
  std::cout << "bf16 on this CPU: "
            << (process::cpu_has_bf16() ? "native (AVX512-BF16 or AMX-BF16)"
                                        : "emulated (no AVX512-BF16 or AMX-BF16): train.precision=bf16 runs slower than fp32")
            << "; oneDNN ISA " << process::onednn_isa() << "\n";
  return 0;
}

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
    return kFailure;
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
  TrainArgs train_args;
  cli::LaunchOptions launch_options;
  GraphArgs graph_args;
  ProfileArgs profile_args;
  CalibrateArgs calibrate_args;
  RunDirArgs report_args, export_args;
  DiffArgs diff_args;
  cli::PlanArgs plan_args;
  cli::SimulateArgs simulate_args;
  auto* train_cmd = add_train_command(app, train_args);
  auto* launch_cmd = add_launch_command(app, launch_options);
  auto* graph_cmd = add_graph_command(app, graph_args);
  auto* profile_cmd = add_profile_command(app, profile_args);
  auto* calibrate_cmd = add_calibrate_command(app, calibrate_args);
  auto* report_cmd = add_report_command(app, report_args);
  auto* export_cmd = add_export_command(app, export_args);
  auto* diff_cmd = add_diff_command(app, diff_args);
  auto* plan_cmd = cli::add_plan_command(app, plan_args);
  auto* simulate_cmd = cli::add_simulate_command(app, simulate_args);
  auto* version_cmd = app.add_subcommand("version", "print trident's version, its LibTorch, build (CPU or CUDA) and backends");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "trident: " << e.what() << " (see trident --help)\n";
    return kBadInput;
  }
  return guarded([&] {
    if (*train_cmd) return train(train_args);
    if (*launch_cmd) return cli::launch(launch_options);
    if (*graph_cmd) return cli::show_graph(graph_args.model, graph_args.out, graph_args.all_ops, graph_args.by_module);
    if (*profile_cmd) return run_profile(profile_args);
    if (*calibrate_cmd) return run_calibrate(calibrate_args);
    if (*plan_cmd) return cli::run_plan(plan_args);
    if (*report_cmd) return cli::run_report(report_args.run_dir);
    if (*export_cmd) return export_run(export_args.run_dir, export_args.out);
    if (*diff_cmd) return diff_runs(diff_args);
    if (*simulate_cmd) return cli::run_simulate(simulate_args);
    if (*version_cmd) return show_version();
    return 0;
  });
}
