// `trident plan`: the planner behind the command line; its flags are the
// config keys `trident train` reads (see Note [Config to request]).
#include "commands.h"

#include <cmath>

#include <iostream>

#include "plans.h"
#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/config/plan_request.h"
#include "trident/images/loader_rate.h"
#include "trident/cost/cluster.h"
#include "trident/planner/planner.h"
#include "trident/report/plan_tables.h"

namespace trident::cli {
namespace {

struct PlanArgs {
  zoo::ModelSpec model;
  std::string cluster = "auto", partitioner = "graphpipe", schedule;
  std::string grad_sync = "hybrid", optimizer = "adam", profile, out, dot, recompute = "auto", precision = "fp32";
  std::string placement = "auto";
  int devices = 1, mini_batch = 0, micro_batch = 0, max_replicas = 0, micro_batch_ratio = 0, pipeline_delay = 0;
  double device_memory_gb = 0;
  int sync_rows = 12;
};

// The flags as the config keys they stand for, so that `trident plan` asks
// the planner what `trident train` would (see Note [Config to request]).
config::TrainConfig plan_config(const PlanArgs& a) {
  using config::PartitionerKind;
  const auto kind = config::partitioner_kind(a.partitioner);
  if (!kind || *kind == PartitionerKind::kPlanFile)
    throw plan::PlanError("partitioner '" + a.partitioner + "' is unknown; use " + join(planner::partitioner_names()));
  config::TrainConfig c;
  c.model = a.model;
  c.train.mini_batch = a.mini_batch;
  auto& par = c.parallel;
  par.devices = a.devices, par.micro_batch = a.micro_batch, par.partitioner = a.partitioner;
  par.schedule = a.schedule.empty() ? "auto" : a.schedule;
  par.grad_sync = a.grad_sync, par.max_replicas = a.max_replicas, par.recompute = a.recompute;
  par.micro_batch_ratio = a.micro_batch_ratio;
  if (a.pipeline_delay != 0 && a.pipeline_delay != 1)
    throw plan::PlanError("--pipeline-delay " + std::to_string(a.pipeline_delay) + ": allowed: 0, 1");
  par.pipeline_delay = a.pipeline_delay;
  if (const auto k = a.model.graph_chunks; k > 1) {  // GNNPipe mode, as `trident train` reads it (Note [Node chunks])
    if (a.mini_batch != k)
      throw plan::PlanError("--mini-batch " + std::to_string(a.mini_batch) + ": GNNPipe mode trains every chunk once a "
                            "step, so it must be --graph-chunks = " + std::to_string(k));
    if (!a.micro_batch) par.micro_batch = 1;  // one chunk per micro-batch
  }
  if (a.optimizer == "adam" || a.optimizer == "sgd") c.optimizer.name = a.optimizer;  // sgd: with momentum 0.9
  else if (a.optimizer == "sgd-plain") c.optimizer.name = "sgd", c.optimizer.momentum = 0;
  else throw plan::PlanError("--optimizer '" + a.optimizer + "' is unknown; use adam, sgd (with momentum) or sgd-plain");
  if (!graph::precision_from_string(a.precision))
    throw plan::PlanError("--precision '" + a.precision + "' is unknown; use fp32 or bf16");
  c.train.precision = a.precision;
  return c;
}

// What an image dataset would ask of the loader (docs/data.md): the plan's
// samples/s over this machine's decode rate per thread (trident calibrate).
std::string loader_note(double samples_per_s, double rate, int processes) {
  const int threads = static_cast<int>(std::ceil(samples_per_s / rate));
  const int each = (threads + processes - 1) / processes;
  return "image data: this machine decodes " + format_number("%.0f", rate) + " JPEGs/s per thread (trident calibrate); " +
         format_number("%.1f", samples_per_s) + " samples/s takes " + std::to_string(threads) + " decoding thread" +
         (threads == 1 ? "" : "s") + " (data.workers >= " + std::to_string(each) + " on each of " +
         std::to_string(processes) + " process" + (processes == 1 ? "" : "es") +
         "), or the loader, not the model, bounds the step";
}

int run_plan(PlanArgs a) {
  const auto g = model_graph(a.model);
  const auto cluster = cost::load_cluster(a.cluster);
  auto r = config::plan_request(plan_config(a));
  r.placement = a.placement;
  if (a.device_memory_gb != 0) {
    if (!(a.device_memory_gb > 0))
      throw plan::PlanError("--device-memory-gb must be > 0, got " + std::to_string(a.device_memory_gb));
    r.device_memory_bytes = a.device_memory_gb * 1024 * 1024 * 1024;
  }
  planner::Planner planner(g, cluster, plan_cost_model({}, a.profile, cluster, g, a.model.preset, a.devices, r.precision), r);
  auto p = planner.make();
  if (!cluster.note.empty()) std::cout << "cluster " << cluster.name << ": " << cluster.note << "\n";
  std::cout << report::stage_table(planner, p) << "\n" << report::sync_table(planner, p, a.sync_rows);
  if (const auto rate = images::read_loader_rate(); rate && p.predicted.samples_per_s > 0)
    std::cout << loader_note(p.predicted.samples_per_s, *rate, a.devices) << "\n";
  if (!a.out.empty()) {
    write_file_atomic(a.out, p.to_json().dump(1) + "\n");
    std::cout << "wrote " << a.out << "\n";
  }
  if (!a.dot.empty()) {
    write_file_atomic(a.dot, report::to_dot(p));
    std::cout << "wrote " << a.dot << " (render: dot -Tsvg " << a.dot << " -o plan.svg)\n";
  }
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* c = app.add_subcommand("plan", "find the fastest plan (stages, devices, micro-batch, schedule, sync) for a model on a cluster");
  add_model_options(c, a->model);
  c->add_option("--cluster", a->cluster, "auto (this machine, see `trident calibrate`) | " + join(cost::cluster_presets(), " | ") + " | a .yaml/.json file");
  c->add_option("--devices", a->devices, "devices (one process each)")->required();
  c->add_option("--mini-batch", a->mini_batch, "samples per iteration (global batch)")->required();
  c->add_option("--micro-batch", a->micro_batch, "fix the micro-batch (default: search powers of two)");
  c->add_option("--partitioner", a->partitioner, "graphpipe | pipedream | dp");
  c->add_option("--schedule", a->schedule,
                "gpipe | 1f1b | graph-1f1b | zb-h1 | zb-h2 | graph-zb (default: graph-1f1b for graphpipe, else 1f1b)");
  c->add_option("--pipeline-delay", a->pipeline_delay,
                "0 | 1: plan for PipeDream-2BW's delayed update (parallel.pipeline_delay; 1f1b or graph-1f1b); the "
                "delayed prediction is printed beside the synchronous one either way");
  c->add_option("--grad-sync", a->grad_sync, "hybrid | allreduce | ps | sfb");
  c->add_option("--optimizer", a->optimizer, "adam | sgd | sgd-plain (sets optimizer-state memory)");
  c->add_option("--precision", a->precision, "fp32 | bf16 (train.precision: activation memory and edge bytes)");
  c->add_option("--max-replicas", a->max_replicas, "at most this many data-parallel replicas per stage (default: no limit)");
  c->add_option("--micro-batch-ratio", a->micro_batch_ratio,
                "a stage's micro-batch may be up to this many times the plan's smallest (a power of two; 1: one size for "
                "every stage; default: 2 for graphpipe with a searched micro-batch, else 1)");
  c->add_option("--recompute", a->recompute, "auto | never | always: recompute a stage's forward in its backward (auto: where it would not fit otherwise)");
  c->add_option("--device-memory-gb", a->device_memory_gb, "memory per device in GiB (default: the cluster's)");
  c->add_option("--profile", a->profile, "profile.json from `trident profile`: measured op times instead of the analytic model");
  c->add_option("--placement", a->placement,
                "on a mixed cluster: auto (the fastest) | class-aware | as-average | one-class (a baseline's best)");
  c->add_option("--out", a->out, "write the plan JSON here");
  c->add_option("--dot", a->dot, "write the stage graph as Graphviz DOT here");
  c->add_option("--sync-rows", a->sync_rows, "rows of the gradient-sync table");
  return {c, [a] { return run_plan(*a); }};
}

}  // namespace trident::cli
