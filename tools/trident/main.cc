// The `trident` command line. Exit codes (DESIGN.md): 0 success; 2 bad input
// (config, flags, missing data) with one line naming the field, the value
// and what is allowed; 1 a failure while running; 130 interrupted (a
// checkpoint was written first).
#include <CLI/CLI.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <iostream>

#include "launch.h"
#include "plan_commands.h"
#include "report_command.h"
#include "trident/report/report.h"
#include "trident/comm/world.h"
#include "trident/data/dataset.h"
#include "trident/runtime/blas.h"
#include "trident/runtime/checkpoint.h"
#include "trident/runtime/emulate.h"
#include "trident/runtime/profiler.h"
#include "trident/runtime/sharded_checkpoint.h"
#include "trident/plan/report.h"
#include "trident/runtime/trainer.h"
#include "trident/zoo/zoo.h"

namespace {

using namespace trident;

constexpr int kBadInput = 2, kFailure = 1, kInterrupted = 130;

int train(const std::string& config_path, std::vector<std::string> sets, const std::string& resume_dir, int nproc,
          const std::string& emulate, double dilation) {
  std::string path = config_path;
  if (!resume_dir.empty() && path.empty()) path = resume_dir + "/config.yaml";
  if (path.empty()) throw runtime::ConfigError("train: give --config FILE, or --resume RUN_DIR");
  if (nproc < 0) throw runtime::ConfigError("train: --nproc " + std::to_string(nproc) + " must be >= 1");
  if (nproc > 0) sets.push_back("parallel.devices=" + std::to_string(nproc));
  if (emulate.empty() && dilation != 1) throw runtime::ConfigError("train: --dilation applies only with --emulate CLUSTER");
  auto config = runtime::load_config(path, sets);
  if (!resume_dir.empty() && !std::filesystem::is_directory(resume_dir))
    throw runtime::ConfigError("--resume " + resume_dir + ": no such run directory");
  // Several processes without a launcher around us: check, then become the launcher.
  if (config.parallel.devices > 1 && comm::world_from_env().launcher == "none") {
    if (!emulate.empty()) {
      const auto checked = runtime::emulated_config(config, emulate, dilation);
      runtime::plan_for(checked, zoo::build_graph(checked.model));
    } else {
      runtime::plan_for(config, zoo::build_graph(config.model));
    }
    cli::LaunchOptions lo;
    lo.nproc = static_cast<int>(config.parallel.devices);
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
  if (!resume_dir.empty()) {
    // The run directory decides where the checkpoint is, whatever the config says.
    std::filesystem::path dir(resume_dir);
    config.name = dir.filename().string();
    config.runs_dir = dir.parent_path().empty() ? "." : dir.parent_path().string();
  }
  if (auto warning = runtime::blas_warning(); !warning.empty()) std::cerr << warning << "\n";
  runtime::Trainer trainer(config, !resume_dir.empty(), std::cout);
  std::signal(SIGINT, [](int) { runtime::Trainer::stop_requested() = true; });
  std::signal(SIGTERM, [](int) { runtime::Trainer::stop_requested() = true; });
  auto result = trainer.run();
  if (result.interrupted) return kInterrupted;
  if (result.test_accuracy) {
    std::cout << "test accuracy: " << std::fixed << std::setprecision(2) << 100 * *result.test_accuracy << "%\n";
  }
  return 0;
}

using plan::human_bytes;

// `trident export RUN_DIR [--out FILE]`: the newest checkpoint's weights for plain PyTorch.
int export_run(const std::string& run_dir, std::string out) {
  if (!std::filesystem::is_directory(run_dir)) throw runtime::ConfigError("export: " + run_dir + " is not a run directory");
  runtime::CheckpointReader ck;
  try {
    ck = runtime::CheckpointReader::latest(run_dir);
  } catch (const runtime::CheckpointError& e) {
    throw runtime::ConfigError(std::string("export: ") + e.what());
  }
  if (out.empty()) out = (std::filesystem::path(run_dir) / "weights.pt").string();
  const auto n = runtime::export_weights(ck, out);
  std::cout << "exported " << n << " parameters of step " << ck.step() << " (" << ck.path() << ") to " << out
            << "; in Python: model.load_state_dict(torch.load('" << out << "'))\n";
  return 0;
}

int show_graph(const std::string& model, const std::string& preset, const std::string& out, bool all_ops) {
  auto g = zoo::build_graph({model, preset});
  double fwd = 0, bwd = 0;
  std::int64_t act = 0;
  for (const auto& op : g.ops()) fwd += op.forward_flops, bwd += op.backward_flops, act += op.activation_bytes;
  std::cout << "model " << model << "/" << preset << ": " << g.size() << " ops, parameters "
            << human_bytes(static_cast<double>(g.param_bytes())) << ", per sample: forward "
            << fwd / 1e6 << " MFLOP, backward " << bwd / 1e6 << " MFLOP, activations "
            << human_bytes(static_cast<double>(act)) << "\n";
  if (all_ops) {
    std::cout << std::left << std::setw(34) << "op" << std::setw(16) << "kind" << std::setw(22) << "output"
              << std::right << std::setw(12) << "params" << std::setw(14) << "fwd MFLOP" << "\n";
    for (const auto& op : g.ops()) {
      std::cout << std::left << std::setw(34) << op.name << std::setw(16) << op.kind << std::setw(22)
                << graph::to_string(op.output) << std::right << std::setw(12)
                << human_bytes(static_cast<double>(op.param_bytes())) << std::setw(14) << std::fixed
                << std::setprecision(3) << op.forward_flops / 1e6 << "\n";
    }
  }
  if (!out.empty()) {
    runtime::write_file_atomic(out, g.to_json().dump(1) + "\n");
    std::cout << "wrote " << out << "\n";
  }
  return 0;
}

struct ProfileArgs {
  std::string model, preset = "tiny", out, rows = "1,2,4,8";
  int repeats = 5, threads = 1;
};

int run_profile(const ProfileArgs& a) {
  runtime::ProfileOptions po;
  po.rows.clear();
  std::stringstream list(a.rows);
  for (std::string item; std::getline(list, item, ',');) {
    try {
      po.rows.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw std::invalid_argument("profile: --micro-batches '" + a.rows + "' must be integers like 1,2,4,8");
    }
  }
  po.repeats = a.repeats, po.threads = a.threads;
  auto p = runtime::profile_model({a.model, a.preset}, po);
  runtime::write_file_atomic(a.out, p.to_json().dump(1) + "\n");
  std::cout << "profiled " << p.ops.size() << " ops of " << a.model << "/" << a.preset << " at " << a.rows
            << " rows; wrote " << a.out << " (use: trident plan --profile " << a.out << " --cluster cpu-local ...)\n";
  return 0;
}

// Bad input (config, data, flags, plans, run directories) is exit 2;
// anything while running is 1. (Issue 14 replaces this list with one error base.)
bool is_bad_input(const std::exception& e) {
  return dynamic_cast<const runtime::ConfigError*>(&e) ||
         (dynamic_cast<const comm::CommError*>(&e) && std::string(e.what()).rfind("environment:", 0) == 0) ||
         dynamic_cast<const data::DataError*>(&e) || dynamic_cast<const std::invalid_argument*>(&e) ||
         cli::is_plan_input_error(e) || dynamic_cast<const report::ReportError*>(&e);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trident: plan and train multi-branch DNNs (graph pipelines + Poseidon data parallelism)", "trident"};
  app.require_subcommand(1);

  std::string config_path, resume_dir;
  std::vector<std::string> sets;
  auto* train_cmd = app.add_subcommand("train", "train a model from a YAML config");
  train_cmd->add_option("--config", config_path, "config file (examples/*.yaml)");
  train_cmd->add_option("--set", sets, "override a config key: --set train.epochs=2 (repeatable)");
  train_cmd->add_option("--resume", resume_dir, "continue the run in RUN_DIR (e.g. runs/NAME) from its checkpoint");
  int nproc = 0;
  std::string emulate;
  double dilation = 1;
  train_cmd->add_option("--dilation", dilation, "with --emulate: stretch every modelled time by this factor (1-1000); results are divided by it");
  train_cmd->add_option("--emulate", emulate, "run the pipeline planned for CLUSTER (e.g. summit-v100) with modelled compute and transfer times instead of training");
  train_cmd->add_option("--nproc", nproc, "data parallel on N local processes (sets parallel.devices=N and launches them)");

  cli::LaunchOptions launch_options;
  auto* launch_cmd = app.add_subcommand("launch", "start N local workers of a trident subcommand: trident launch --nproc N -- train --config f.yaml");
  launch_cmd->add_option("--nproc", launch_options.nproc, "number of worker processes")->required();
  launch_cmd->add_option("--master-port", launch_options.master_port, "rendezvous port on 127.0.0.1 (default: a free one)");
  launch_cmd->add_option("--grace-s", launch_options.grace_s, "after a worker fails, seconds the others get to exit before SIGKILL");
  launch_cmd->add_option("args", launch_options.args, "the subcommand and its flags, after --");

  std::string model, preset = "tiny", out;
  bool all_ops = false;
  auto* graph_cmd = app.add_subcommand("graph", "summarise a zoo model's operator graph; --out writes it as JSON");
  graph_cmd->add_option("--model", model, "mlp | cnn | inception | transformer | mmt | dlrm | candle_uno")->required();
  graph_cmd->add_option("--preset", preset, "tiny | paper");
  graph_cmd->add_option("--out", out, "write the graph JSON here");
  graph_cmd->add_flag("--ops", all_ops, "print one line per op");

  ProfileArgs profile_args;
  auto* profile_cmd = app.add_subcommand("profile", "measure each op's forward and backward time on this machine, for `trident plan --profile`");
  profile_cmd->add_option("--model", profile_args.model, "mlp | cnn | inception | transformer | mmt | dlrm | candle_uno")->required();
  profile_cmd->add_option("--preset", profile_args.preset, "tiny | paper");
  profile_cmd->add_option("--micro-batches", profile_args.rows, "row counts to measure, ascending: 1,2,4,8");
  profile_cmd->add_option("--repeats", profile_args.repeats, "runs per op and row count (the median is kept)");
  profile_cmd->add_option("--threads", profile_args.threads, "threads, as in training");
  profile_cmd->add_option("--out", profile_args.out, "write profile.json here")->required();

  std::string report_dir;
  auto* report_cmd = app.add_subcommand("report", "summarise a run: measured vs simulated iteration, bubble, timeline SVG, loss curve, stage graph");
  report_cmd->add_option("run_dir", report_dir, "the run directory, e.g. runs/fmnist-inception")->required();

  std::string export_dir, export_out;
  auto* export_cmd = app.add_subcommand("export", "write a run's newest checkpoint as a PyTorch state_dict file (torch.load)");
  export_cmd->add_option("run_dir", export_dir, "the run directory, e.g. runs/fmnist-inception")->required();
  export_cmd->add_option("--out", export_out, "output file (default RUN_DIR/weights.pt)");

  cli::PlanArgs plan_args;
  auto* plan_cmd = cli::add_plan_command(app, plan_args);
  cli::SimulateArgs simulate_args;
  auto* simulate_cmd = cli::add_simulate_command(app, simulate_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "trident: " << e.what() << " (see trident --help)\n";
    return kBadInput;
  }
  try {
    if (*train_cmd) return train(config_path, sets, resume_dir, nproc, emulate, dilation);
    if (*launch_cmd) return cli::launch(launch_options);
    if (*graph_cmd) return show_graph(model, preset, out, all_ops);
    if (*profile_cmd) return run_profile(profile_args);
    if (*plan_cmd) return cli::run_plan(plan_args);
    if (*report_cmd) return cli::run_report(report_dir);
    if (*export_cmd) return export_run(export_dir, export_out);
    if (*simulate_cmd) return cli::run_simulate(simulate_args);
  } catch (const std::exception& e) {
    std::cerr << "trident: " << comm::one_line(e) << "\n";
    return is_bad_input(e) ? kBadInput : kFailure;
  }
  return 0;
}
