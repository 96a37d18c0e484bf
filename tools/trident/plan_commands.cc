#include "plan_commands.h"

#include <iostream>

#include "trident/config/plan_request.h"
#include "trident/cost/cost_model.h"
#include "trident/planner/planner.h"
#include "trident/report/plan_tables.h"
#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/schedule/simulator.h"
#include "trident/zoo/zoo.h"

namespace trident::cli {
namespace {

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

// The plan's own cost model (a profile it carries), --profile, else what the
// cluster implies (its calibrated profiles, or its device's analytic model).
cost::CostModel plan_cost_model(const nlohmann::json& described, const std::string& profile_path,
                               const cost::ClusterSpec& cluster, const graph::OpGraph& g, const std::string& preset,
                               int devices, graph::Precision precision) {
  std::string path = profile_path;
  const bool profiled = described.is_object() && described.value("kind", "analytic") == "profiled";
  if (path.empty() && profiled && described.contains("data")) {
    const auto origin = described.value("profile", std::string("the plan's profile"));
    return cost::profiled_cost_model(cost::Profile::from_json(described["data"], origin), g, origin);
  }
  if (path.empty() && profiled) path = described.value("profile", "");
  if (path.empty()) return cost::cost_model_for(cluster, g, preset, cluster.threads_per_process(devices), nullptr, precision);
  return cost::profiled_cost_model(cost::load_profile(path), g, path);
}

void print_warnings(const planner::Planner& planner, const plan::Plan& p) {
  for (const auto& st : p.stages)
    if (st.memory_bytes > planner.memory_cap(st))
      std::cerr << "warning: stage " << st.id << " needs " << human_bytes(st.memory_bytes)
                << " per device, over the " << human_bytes(planner.memory_cap(st)) << " limit\n";
}

}  // namespace

void add_model_options(CLI::App* command, zoo::ModelSpec& model) {
  auto* name = command->add_option("--model", model.name, join(zoo::model_names(), " | "));
  command->add_option("--preset", model.preset, join(zoo::preset_names(), " | "));
  command->add_option("--model-file", model.file, "a user's model.json (tools/export) instead of --model")
      ->excludes(name);
  command->add_option("--graph", model.graph,
                      "graph neural networks: the graph, a directory of .npy files or csbm[:key=value,...] (docs/gnn.md)");
  command->add_option("--graph-chunks", model.graph_chunks,
                      "graph neural networks: GNNPipe mode, the nodes in this many chunks (docs/gnn.md; 0: exact)");
}

graph::OpGraph model_graph(zoo::ModelSpec& model) {
  if (model.name.empty() && model.file.empty())
    throw InputError("--model NAME (" + join(zoo::model_names(), ", ") + ") or --model-file FILE is required");
  auto g = zoo::build_graph(model);
  if (!model.file.empty()) model.name = g.name();
  return g;
}

CLI::App* add_plan_command(CLI::App& app, PlanArgs& a) {
  auto* c = app.add_subcommand("plan", "find the fastest plan (stages, devices, micro-batch, schedule, sync) for a model on a cluster");
  add_model_options(c, a.model);
  c->add_option("--cluster", a.cluster, "auto (this machine, see `trident calibrate`) | " + join(cost::cluster_presets(), " | ") + " | a .yaml/.json file");
  c->add_option("--devices", a.devices, "devices (one process each)")->required();
  c->add_option("--mini-batch", a.mini_batch, "samples per iteration (global batch)")->required();
  c->add_option("--micro-batch", a.micro_batch, "fix the micro-batch (default: search powers of two)");
  c->add_option("--partitioner", a.partitioner, "graphpipe | pipedream | dp");
  c->add_option("--schedule", a.schedule,
                "gpipe | 1f1b | graph-1f1b | zb-h1 | zb-h2 | graph-zb (default: graph-1f1b for graphpipe, else 1f1b)");
  c->add_option("--grad-sync", a.grad_sync, "hybrid | allreduce | ps | sfb");
  c->add_option("--optimizer", a.optimizer, "adam | sgd | sgd-plain (sets optimizer-state memory)");
  c->add_option("--precision", a.precision, "fp32 | bf16 (train.precision: activation memory and edge bytes)");
  c->add_option("--max-replicas", a.max_replicas, "at most this many data-parallel replicas per stage (default: no limit)");
  c->add_option("--micro-batch-ratio", a.micro_batch_ratio,
                "a stage's micro-batch may be up to this many times the plan's smallest (a power of two; 1: one size for "
                "every stage; default: 2 for graphpipe with a searched micro-batch, else 1)");
  c->add_option("--recompute", a.recompute, "auto | never | always: recompute a stage's forward in its backward (auto: where it would not fit otherwise)");
  c->add_option("--device-memory-gb", a.device_memory_gb, "memory per device in GiB (default: the cluster's)");
  c->add_option("--profile", a.profile, "profile.json from `trident profile`: measured op times instead of the analytic model");
  c->add_option("--placement", a.placement,
                "on a mixed cluster: auto (the fastest) | class-aware | as-average | one-class (a baseline's best)");
  c->add_option("--out", a.out, "write the plan JSON here");
  c->add_option("--dot", a.dot, "write the stage graph as Graphviz DOT here");
  c->add_option("--sync-rows", a.sync_rows, "rows of the gradient-sync table");
  return c;
}

CLI::App* add_simulate_command(CLI::App& app, SimulateArgs& a) {
  auto* c = app.add_subcommand("simulate", "predict a plan's iteration: time, samples/s, bubble, memory, timeline");
  c->add_option("--plan", a.plan, "plan JSON (from `trident plan`, or written by hand)")->required();
  c->add_option("--trace", a.trace, "write a Chrome trace (chrome://tracing, ui.perfetto.dev)");
  c->add_flag("--json", a.json, "print the predictions as JSON");
  return c;
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

planner::Planner planner_for(plan::Plan& p, const graph::OpGraph& g, const std::string& origin) {
  plan::validate_plan(p, g);
  if (p.cluster.is_null())
    throw plan::PlanError("plan " + origin + ": cluster is missing; add \"cluster\": {...} (see `trident plan --out`)");
  const auto cluster = cost::parse_cluster(p.cluster.dump(), origin + " (cluster)");
  planner::PlanRequest r;
  r.model = p.model, r.preset = p.preset, r.model_file = p.model_file, r.model_graph = p.model_graph;
  r.graph_chunks = p.graph_chunks;
  r.devices = p.devices, r.mini_batch = p.mini_batch;
  r.optimizer_states = p.optimizer_states;
  r.precision = graph::precision_from_string(p.precision).value_or(graph::Precision::kFp32);
  r.ps_push_scale = p.comm_dtype == "bf16" ? 0.5 : 1;  // See Note [Push dtype]
  const auto names = schedule::all_schedule_names();
  r.schedule = std::find(names.begin(), names.end(), p.schedule) != names.end() ? p.schedule : "1f1b";
  return planner::Planner(g, cluster, plan_cost_model(p.cost_model, "", cluster, g, p.preset, p.devices, r.precision), r);
}

int run_simulate(const SimulateArgs& a) {
  auto p = plan::load_plan(a.plan);
  const auto g = zoo::build_graph({p.model, p.preset, p.model_file, "", p.model_graph, p.graph_chunks});
  const auto planner = planner_for(p, g, a.plan);
  const auto result = planner.predict(p);
  if (a.json) {
    nlohmann::json out = p.to_json()["predicted"];
    out["stages"] = nlohmann::json::array();
    for (const auto& st : p.stages)
      out["stages"].push_back({{"id", st.id},
                               {"utilisation", result.utilisation[st.id]},
                               {"peak_memory_bytes", st.memory_bytes},
                               {"in_flight", st.in_flight}});
    std::cout << out.dump(1) << "\n";
  } else {
    std::cout << report::stage_table(planner, p) << "\nutilisation:";
    for (const auto& st : p.stages) std::cout << " s" << st.id << " " << static_cast<int>(100 * result.utilisation[st.id] + 0.5) << "%";
    std::cout << "\n";
  }
  print_warnings(planner, p);
  if (!a.trace.empty()) {
    write_file_atomic(a.trace, schedule::chrome_trace(planner.stage_graph(p), result).dump() + "\n");
    if (!a.json) std::cout << "wrote " << a.trace << " (open in ui.perfetto.dev or chrome://tracing)\n";
  }
  return 0;
}

}  // namespace trident::cli
