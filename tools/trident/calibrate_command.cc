// `trident calibrate`: this machine measured once (op times, Gloo's links, core sharing) for parallel.cluster: auto.
#include "commands.h"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "launch.h"
#include "trident/base/files.h"
#include "trident/cost/cluster.h"
#include "trident/images/loader_rate.h"
#include "trident/measure/calibrate.h"
#include "trident/zoo/zoo.h"

namespace trident::cli {
namespace {

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
  // The image loader's rate per thread (docs/data.md): `trident plan` sets it beside a plan's samples/s.
  const double rate = images::measure_loader_rate();
  images::write_loader_rate(rate);
  std::cout << "image loader: " << static_cast<long>(rate) << " JPEGs/s per decoding thread (500x375 to a 224 random "
            << "crop); wrote " << images::loader_rate_path() << "\n";
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  auto a = std::make_shared<CalibrateArgs>();
  auto* c = app.add_subcommand("calibrate", "measure this machine (op times, Gloo links, shared cores, optimizer) for parallel.cluster: auto");
  c->add_option("--out", a->out, "write the cluster file here (default: this machine's cache, read by `auto`)");
  c->add_option("--models", a->models, "models to profile, e.g. mlp,inception/tiny (default: every zoo model, tiny)");
  c->add_option("--repeats", a->repeats, "runs per measurement (the median is kept)");
  c->add_option("--max-processes", a->max_processes, "collectives and core sharing measured on 2..N processes (default: cores + 2, at least 5, at most 8)");
  c->add_flag("--if-missing", a->if_missing, "do nothing when this machine is already calibrated");
  c->add_option("--worker", a->worker, "internal: one worker of a measurement")->group("");
  return {c, [a] { return run_calibrate(*a); }};
}

}  // namespace trident::cli
