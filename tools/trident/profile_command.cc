// `trident profile`: each op's forward and backward time on this machine, for `trident plan --profile`.
#include "commands.h"

#include <iostream>
#include <sstream>

#include "trident/base/error.h"
#include "trident/base/files.h"
#include "trident/graph/precision.h"
#include "trident/measure/profiler.h"

namespace trident::cli {
namespace {

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

}  // namespace

Command add_profile_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  auto* c = app.add_subcommand("profile", "measure each op's forward and backward time on this machine, for `trident plan --profile`");
  cli::add_model_options(c, a->model);
  c->add_option("--micro-batches", a->rows, "row counts to measure, ascending: 1,2,4,8");
  c->add_option("--repeats", a->repeats, "runs per op and row count (the median is kept)");
  c->add_option("--threads", a->threads, "threads, as in training");
  c->add_option("--precision", a->precision, "fp32 or bf16, as train.precision")->check(CLI::IsMember({"fp32", "bf16"}));
  c->add_option("--out", a->out, "write profile.json here")->required();
  return {c, [a] { return run_profile(*a); }};
}

}  // namespace trident::cli
