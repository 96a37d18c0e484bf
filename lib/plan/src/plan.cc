#include "trident/plan/plan.h"

#include "trident/schedule/delayed.h"

#include <algorithm>
#include <set>

#include "trident/base/files.h"
#include "trident/base/json.h"
#include "trident/cost/network.h"
#include "trident/graph/precision.h"
#include "trident/graph/subgraph.h"
#include "trident/schedule/schedule.h"
#include "trident/gnn/graph_data.h"

namespace trident::plan {
namespace {

template <class T>
T field(const nlohmann::json& obj, const std::string& key, const std::string& where, const std::string& origin,
        const char* expected) {
  if (!obj.contains(key)) throw PlanError("plan " + origin + ": " + where + key + " is missing");
  try {
    return get_checked<T>(obj.at(key));
  } catch (const nlohmann::json::exception&) {
    throw PlanError("plan " + origin + ": " + where + key + " must be " + expected + ", got " + obj.at(key).dump());
  }
}

// The best predictions by name (of each search space, of each schedule).
void write_predictions(nlohmann::json& doc, const char* key, const std::map<std::string, Prediction>& best) {
  for (const auto& [name, pr] : best)
    doc[key][name] = {
        {"iteration_s", pr.iteration_s}, {"samples_per_s", pr.samples_per_s}, {"bubble_fraction", pr.bubble_fraction}};
}

void read_predictions(const nlohmann::json& doc, const char* key, std::map<std::string, Prediction>& best) {
  if (!doc.contains(key) || !doc[key].is_object()) return;
  for (const auto& [name, pr] : doc[key].items())
    best[name] = {pr.value("iteration_s", 0.0), pr.value("samples_per_s", 0.0), pr.value("bubble_fraction", 0.0), 0};
}

}  // namespace

int Plan::micro_batches(int stage) const {
  const int b = stages.at(static_cast<std::size_t>(stage)).micro_batch;
  return b <= 0 ? 0 : mini_batch / b;
}

std::vector<int> Plan::micro_batch_counts() const {
  std::vector<int> out;
  for (const auto& st : stages) out.push_back(micro_batches(st.id));
  return out;
}

schedule::Schedule schedule_of(const Plan& plan) {
  const auto counts = plan.micro_batch_counts();
  schedule::Schedule s{plan.schedule, *std::max_element(counts.begin(), counts.end()), {}, counts};
  for (const auto& st : plan.stages) {
    try {
      s.stages.push_back(schedule::parse_actions(st.actions));
    } catch (const schedule::ScheduleError& e) {
      throw PlanError("stage " + std::to_string(st.id) + " actions: " + e.what());
    }
  }
  return s;
}

std::pair<std::int64_t, std::int64_t> Plan::replica_rows(int stage, int replica, std::int64_t rows) const {
  const auto& st = stages.at(static_cast<std::size_t>(stage));
  const auto parts = static_cast<std::int64_t>(st.devices.size());
  if (replica < 0 || replica >= parts)
    throw PlanError("stage " + std::to_string(stage) + " has no replica " + std::to_string(replica), ErrorKind::kFailure);
  if (st.partition == "nodes") return {0, rows};  // Note [Node partitions]: every replica runs every graph
  if (st.shares.empty()) {
    const std::int64_t base = rows / parts, extra = rows % parts;
    const std::int64_t begin = replica * base + std::min<std::int64_t>(replica, extra);
    return {begin, begin + base + (replica < extra ? 1 : 0)};
  }
  std::int64_t before = 0;
  for (int j = 0; j < replica; ++j) before += st.shares[static_cast<std::size_t>(j)];
  const std::int64_t through = before + st.shares[static_cast<std::size_t>(replica)];
  const auto b = static_cast<std::int64_t>(st.micro_batch);
  return {rows * before / b, rows * through / b};
}

bool Plan::one_micro_batch_size() const {
  return std::all_of(stages.begin(), stages.end(), [&](const PlanStage& st) { return st.micro_batch == stages[0].micro_batch; });
}

nlohmann::json Plan::to_json() const {
  nlohmann::json doc{{"format", "trident-plan/1"},
                     {"model", model},
                     {"preset", preset},
                     {"cluster", cluster},
                     {"cost_model", cost_model},
                     {"devices", devices},
                     {"mini_batch", mini_batch},
                     {"micro_batch", stages.empty() ? 0 : stages[0].micro_batch},
                     {"partitioner", partitioner},
                     {"schedule", schedule},
                     {"optimizer_states", optimizer_states},
                     {"stages", nlohmann::json::array()},
                     {"edges", nlohmann::json::array()},
                     {"grad_sync", grad_sync},
                     {"predicted",
                      {{"iteration_s", predicted.iteration_s},
                       {"samples_per_s", predicted.samples_per_s},
                       {"bubble_fraction", predicted.bubble_fraction},
                       {"depth", predicted.depth}}},
                     {"search_seconds", search_seconds}};
  if (!space.empty()) doc["space"] = space;
  if (precision != "fp32") doc["precision"] = precision;
  if (comm_dtype != "fp32") doc["comm_dtype"] = comm_dtype;
  if (pipeline_delay) doc["pipeline_delay"] = pipeline_delay;
  if (pipeline_early >= 0) doc["pipeline_early"] = pipeline_early;
  for (const auto& [key, pr] : {std::pair{"synchronous", &synchronous}, std::pair{"delayed", &delayed}})
    if (*pr)
      doc[key] = {{"iteration_s", (*pr)->iteration_s}, {"samples_per_s", (*pr)->samples_per_s},
                  {"bubble_fraction", (*pr)->bubble_fraction}, {"depth", (*pr)->depth}};
  write_predictions(doc, "space_best", space_best);
  write_predictions(doc, "schedule_best", schedule_best);
  write_predictions(doc, "placement_best", placement_best);
  for (const auto& s : stages) {
    doc["stages"].push_back({{"id", s.id},
                             {"ops", s.ops},
                             {"devices", s.devices},
                             {"micro_batch", s.micro_batch},
                             {"in_flight", s.in_flight},
                             {"predicted_tps_s", s.predicted_tps_s},
                             {"memory_bytes", s.memory_bytes},
                             {"param_bytes", s.param_bytes},
                             {"activation_bytes", s.activation_bytes},
                             {"forward_s", s.forward_s},
                             {"backward_s", s.backward_s},
                             {"sync_s", s.sync_s},
                             {"actions", s.actions},
                             {"recompute", s.recompute}});
    if (!s.shares.empty()) doc["stages"].back()["shares"] = s.shares;
    if (!s.partition.empty()) doc["stages"].back()["partition"] = s.partition;
  }
  for (const auto& e : edges) {
    auto tensors = nlohmann::json::array();
    for (const auto& t : e.tensors) tensors.push_back({{"op", t.op}, {"shape", t.shape}, {"dtype", t.dtype}});
    doc["edges"].push_back({{"from", e.from}, {"to", e.to}, {"tensors", tensors}});
  }
  if (!model_file.empty()) doc["model_file"] = model_file;
  if (!model_graph.empty()) doc["graph"] = model_graph;
  if (graph_chunks > 1) doc["graph_chunks"] = graph_chunks;
  if (!fanouts.empty()) doc["fanouts"] = fanouts;
  if (sample_replace) doc["sample_replace"] = true;
  if (hidden) doc["hidden"] = hidden;
  if (node_embedding) doc["node_embedding"] = node_embedding;
  return doc;
}

namespace {

// stages[i] of a plan document.
PlanStage stage_from_json(const nlohmann::json& js, std::size_t i, const std::string& origin) {
  const std::string where = "stages[" + std::to_string(i) + "].";
  PlanStage s;
  s.id = field<int>(js, "id", where, origin, "an integer");
  s.ops = field<std::vector<std::string>>(js, "ops", where, origin, "a list of op names");
  s.devices = field<std::vector<int>>(js, "devices", where, origin, "a list of device ids");
  s.micro_batch = field<int>(js, "micro_batch", where, origin, "an integer");
  if (js.contains("shares")) s.shares = field<std::vector<int>>(js, "shares", where, origin, "a list of row counts, one per device");
  if (js.contains("partition")) s.partition = field<std::string>(js, "partition", where, origin, "\"nodes\"");
  s.actions = js.value("actions", "");
  s.in_flight = value_checked(js, "in_flight", 0);
  if (js.contains("recompute")) s.recompute = field<bool>(js, "recompute", where, origin, "true or false");
  s.predicted_tps_s = js.value("predicted_tps_s", 0.0);
  s.memory_bytes = js.value("memory_bytes", 0.0);
  s.param_bytes = js.value("param_bytes", 0.0);
  s.activation_bytes = js.value("activation_bytes", 0.0);
  s.forward_s = js.value("forward_s", 0.0);
  s.backward_s = js.value("backward_s", 0.0);
  s.sync_s = js.value("sync_s", 0.0);
  return s;
}

// A plan document's edges; throws PlanError naming their form.
std::vector<PlanEdge> edges_from_json(const nlohmann::json& edges, const std::string& origin) {
  std::vector<PlanEdge> out;
  try {
    for (const auto& je : edges) {
      PlanEdge e;
      e.from = get_checked<int>(je.at("from")), e.to = get_checked<int>(je.at("to"));
      for (const auto& jt : je.at("tensors"))
        e.tensors.push_back({jt.at("op").get<std::string>(), get_checked<std::vector<std::int64_t>>(jt.at("shape")),
                             jt.at("dtype").get<std::string>()});
      out.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw PlanError("plan " + origin + ": edges must be a list of {from, to, tensors: [{op, shape, dtype}]}: " +
                    e.what());
  }
  return out;
}

}  // namespace

Plan Plan::from_json(const nlohmann::json& doc, const std::string& origin) {
  try {
    if (!has_format(doc, "trident-plan/1"))
      throw PlanError("plan " + origin + ": not a trident plan (expected \"format\": \"trident-plan/1\")");
    Plan p;
    p.model = field<std::string>(doc, "model", "", origin, "a model name");
    p.preset = field<std::string>(doc, "preset", "", origin, "a preset name");
    if (doc.contains("model_file")) p.model_file = field<std::string>(doc, "model_file", "", origin, "a model file's path");
    if (doc.contains("graph")) p.model_graph = field<std::string>(doc, "graph", "", origin, "a GNN's graph source");
    if (doc.contains("graph_chunks"))
      p.graph_chunks = field<std::int64_t>(doc, "graph_chunks", "", origin, "GNNPipe mode's chunk count");
    if (doc.contains("fanouts")) p.fanouts = field<std::vector<int>>(doc, "fanouts", "", origin, "a sampled GNN's fan-outs");
    if (doc.contains("sample_replace")) p.sample_replace = field<bool>(doc, "sample_replace", "", origin, "true or false");
    if (doc.contains("hidden")) p.hidden = field<std::int64_t>(doc, "hidden", "", origin, "a GNN's hidden width");
    if (doc.contains("node_embedding"))
      p.node_embedding = field<std::int64_t>(doc, "node_embedding", "", origin, "a sampled GNN's node embedding width");
    p.cluster = doc.value("cluster", nlohmann::json());
    p.cost_model = doc.value("cost_model", nlohmann::json{{"kind", "analytic"}});
    p.devices = field<int>(doc, "devices", "", origin, "an integer");
    p.mini_batch = field<int>(doc, "mini_batch", "", origin, "an integer");
    p.partitioner = doc.value("partitioner", "hand-written");
    p.schedule = doc.value("schedule", "graph-1f1b");
    p.optimizer_states = doc.contains("optimizer_states") ? field<int>(doc, "optimizer_states", "", origin, "an integer") : 2;
    p.precision = doc.contains("precision") ? field<std::string>(doc, "precision", "", origin, "fp32 or bf16") : "fp32";
    if (!graph::precision_from_string(p.precision))
      throw PlanError("plan " + origin + ": precision = '" + p.precision + "': allowed: fp32, bf16");
    p.comm_dtype = doc.contains("comm_dtype") ? field<std::string>(doc, "comm_dtype", "", origin, "fp32 or bf16") : "fp32";
    if (p.comm_dtype != "fp32" && p.comm_dtype != "bf16")
      throw PlanError("plan " + origin + ": comm_dtype = '" + p.comm_dtype + "': allowed: fp32, bf16");
    if (!doc.contains("stages") || !doc["stages"].is_array())
      throw PlanError("plan " + origin + ": stages must be a list of {id, ops, devices, micro_batch}");
    for (std::size_t i = 0; i < doc["stages"].size(); ++i) p.stages.push_back(stage_from_json(doc["stages"][i], i, origin));
    if (doc.contains("grad_sync"))
      p.grad_sync = field<std::map<std::string, std::string>>(doc, "grad_sync", "", origin, "a map parameter -> method");
    if (doc.contains("predicted")) {
      const auto& pr = doc["predicted"];
      p.predicted = {pr.value("iteration_s", 0.0), pr.value("samples_per_s", 0.0), pr.value("bubble_fraction", 0.0),
                     value_checked(pr, "depth", 0)};
    }
    if (doc.contains("pipeline_delay")) {
      p.pipeline_delay = field<int>(doc, "pipeline_delay", "", origin, "0 or 1");
      if (p.pipeline_delay != 0 && p.pipeline_delay != 1)
        throw PlanError("plan " + origin + ": pipeline_delay = " + std::to_string(p.pipeline_delay) + ": allowed: 0, 1");
    }
    if (doc.contains("pipeline_early"))
      p.pipeline_early = field<int>(doc, "pipeline_early", "", origin, "the most forwards a stage runs a step early");
    for (const auto& [key, pr] : {std::pair{"synchronous", &p.synchronous}, std::pair{"delayed", &p.delayed}})
      if (doc.contains(key))
        *pr = Prediction{doc[key].value("iteration_s", 0.0), doc[key].value("samples_per_s", 0.0),
                         doc[key].value("bubble_fraction", 0.0), value_checked(doc[key], "depth", 0)};
    p.search_seconds = doc.value("search_seconds", 0.0);
    p.space = doc.value("space", "");
    read_predictions(doc, "space_best", p.space_best);
    read_predictions(doc, "schedule_best", p.schedule_best);
    read_predictions(doc, "placement_best", p.placement_best);
    // Edges are derived (validate_plan rebuilds them); read them back so that
    // a written plan can be drawn without its model.
    if (doc.contains("edges") && doc["edges"].is_array()) p.edges = edges_from_json(doc["edges"], origin);
    return p;
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong kind, e.g. a list where a number goes
    throw PlanError("plan " + origin + ": " + e.what());
  }
}

Plan load_plan(const std::string& path) {
  return Plan::from_json(read_json_file<PlanError>(path, "plan"), path);
}

std::vector<int> stage_of_ops(const Plan& plan, const graph::OpGraph& g) {
  std::vector<int> stage(g.size(), -1);
  for (const auto& s : plan.stages) {
    for (const auto& name : s.ops) {
      auto id = g.find(name);
      if (!id) throw PlanError("stage " + std::to_string(s.id) + ": op '" + name + "' is not in model " + g.name());
      if (stage[*id] >= 0)
        throw PlanError("op '" + name + "' is in stage " + std::to_string(stage[*id]) + " and stage " +
                        std::to_string(s.id) + "; each op belongs to exactly one stage");
      stage[*id] = s.id;
    }
  }
  for (graph::OpId id = 0; id < g.size(); ++id)
    if (stage[id] < 0)
      throw PlanError("op '" + g.op(id).name + "' is in no stage; every op of " + g.name() +
                      " must be in exactly one");
  return stage;
}

namespace {

// See Note [Replica shares]: one positive row count per device, summing to
// the micro-batch.
void check_shares(const PlanStage& s, const std::string& st) {
  const auto listed = [&] {
    std::string out;
    for (int x : s.shares) out += (out.empty() ? "" : ", ") + std::to_string(x);
    return "[" + out + "]";
  };
  if (s.shares.size() != s.devices.size())
    throw PlanError(st + ": shares " + listed() + " has " + std::to_string(s.shares.size()) + " entries for " +
                    std::to_string(s.devices.size()) + " devices; allowed: one row count per device");
  int sum = 0;
  for (int x : s.shares) {
    if (x < 1) throw PlanError(st + ": shares " + listed() + " has " + std::to_string(x) + "; every device runs at least 1 row");
    sum += x;
  }
  if (sum != s.micro_batch)
    throw PlanError(st + ": shares " + listed() + " sum to " + std::to_string(sum) + ", not its micro_batch " +
                    std::to_string(s.micro_batch));
}

// Ids in order; devices in range and used once; micro-batch sizes that
// divide the mini-batch and split among each stage's devices.
void check_stages(const Plan& plan) {
  const int n = static_cast<int>(plan.stages.size());
  if (n == 0) throw PlanError("plan has no stages");
  if (plan.devices < 1) throw PlanError("plan devices must be >= 1, got " + std::to_string(plan.devices));
  if (plan.mini_batch < 1) throw PlanError("plan mini_batch must be >= 1, got " + std::to_string(plan.mini_batch));
  std::vector<int> owner(plan.devices, -1);
  for (int i = 0; i < n; ++i) {
    const auto& s = plan.stages[i];
    const std::string st = "stage " + std::to_string(i);
    if (s.id != i) throw PlanError("stages[" + std::to_string(i) + "].id is " + std::to_string(s.id) + "; ids must be 0, 1, 2, ... in order");
    if (s.devices.empty()) throw PlanError(st + " has no devices");
    for (int d : s.devices) {
      if (d < 0 || d >= plan.devices)
        throw PlanError(st + ": device " + std::to_string(d) + " is outside 0.." + std::to_string(plan.devices - 1));
      if (owner[d] >= 0)
        throw PlanError("device " + std::to_string(d) + " is used by stage " + std::to_string(owner[d]) + " and " + st);
      owner[d] = i;
    }
    if (s.micro_batch < 1 || plan.mini_batch % s.micro_batch)
      throw PlanError(st + ": micro_batch " + std::to_string(s.micro_batch) + " must divide mini_batch " +
                      std::to_string(plan.mini_batch));
    if (!s.partition.empty() && s.partition != "nodes")
      throw PlanError(st + ": partition = '" + s.partition + "'; allowed: \"nodes\" (graph parallelism), or none");
    if (s.partition == "nodes") {
      if (!s.shares.empty()) throw PlanError(st + ": shares split rows; a stage with partition \"nodes\" splits nodes");
    } else if (!s.shares.empty()) {
      check_shares(s, st);
    } else if (s.micro_batch % static_cast<int>(s.devices.size())) {
      throw PlanError(st + ": micro_batch " + std::to_string(s.micro_batch) + " does not split evenly among its " +
                      std::to_string(s.devices.size()) + " devices; give shares (rows per device) to split it unevenly");
    }
  }
}

// Every stage convex; its ops rewritten in topological order, as the runtime runs them.
void sort_convex_stages(Plan& plan, const graph::OpGraph& g) {
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    std::set<graph::OpId> ops;
    for (const auto& name : plan.stages[i].ops) ops.insert(g.id_of(name));
    try {
      graph::make_subgraph(g, ops);
    } catch (const graph::GraphError& e) {
      throw PlanError("stage " + std::to_string(i) + " is not convex: " + e.what());
    }
    plan.stages[i].ops.clear();
    for (auto id : ops) plan.stages[i].ops.push_back(g.op(id).name);
  }
}

// Rebuilds the edges — one per stage pair, carrying each producer's output
// once — and returns the stage graph, checked to be acyclic.
schedule::StageGraph rebuild_edges(Plan& plan, const graph::OpGraph& g, const std::vector<int>& stage) {
  std::map<std::pair<int, int>, std::set<graph::OpId>> crossing;
  for (graph::OpId id = 0; id < g.size(); ++id)
    for (graph::OpId c : g.consumers(id))
      if (stage[id] != stage[c]) crossing[{stage[id], stage[c]}].insert(id);
  plan.edges.clear();
  schedule::StageGraph sg;
  sg.stages.resize(plan.stages.size());
  for (const auto& [key, producers] : crossing) {
    PlanEdge e{key.first, key.second, {}};
    for (auto id : producers) {
      const auto& out = g.op(id).output;
      e.tensors.push_back({g.op(id).name, out.shape, graph::to_string(out.dtype)});
    }
    plan.edges.push_back(std::move(e));
    sg.edges.push_back({key.first, key.second});
  }
  try {
    sg.check();
  } catch (const schedule::ScheduleError&) {
    throw PlanError("the stages' dependencies form a cycle; split or merge stages so that they form a DAG");
  }
  return sg;
}

// Every named parameter exists and its method is known (sfb only on Linear weights).
void check_grad_sync(const Plan& plan, const graph::OpGraph& g) {
  for (const auto& [name, method] : plan.grad_sync) {
    cost::SyncMethod m;
    try {
      m = cost::sync_method_from_string(method);
    } catch (const std::exception& e) {
      throw PlanError("grad_sync['" + name + "']: " + e.what());
    }
    const graph::Op* owner_op = nullptr;
    const graph::ParamSpec* param = nullptr;
    for (const auto& op : g.ops())
      for (const auto& p : op.params)
        if (p.name == name) owner_op = &op, param = &p;
    if (!param) throw PlanError("grad_sync names '" + name + "', which is not a parameter of " + g.name());
    if (m == cost::SyncMethod::kSfb && !cost::sfb_shape(*owner_op, *param))
      throw PlanError("grad_sync['" + name + "'] is sfb, which applies only to Linear weights; use allreduce or ps");
  }
}

void check_ratios(const Plan& plan) {
  for (const auto& e : plan.edges) {
    const int a = plan.stages[e.from].micro_batch, b = plan.stages[e.to].micro_batch;
    if (std::max(a, b) % std::min(a, b))
      throw PlanError("stage " + std::to_string(e.to) + " has micro_batch " + std::to_string(b) + " and feeds on stage " +
                      std::to_string(e.from) + " of micro_batch " + std::to_string(a) +
                      "; neighbouring stages' micro-batches must divide one another (e.g. powers of two)");
  }
}

// Stage actions, when given, parse and pass the schedule validator.
void check_actions(const Plan& plan, const schedule::StageGraph& sg) {
  const bool any = std::any_of(plan.stages.begin(), plan.stages.end(), [](auto& s) { return !s.actions.empty(); });
  if (!any) return;
  const auto s = schedule_of(plan);
  try {
    schedule::validate(sg, s);
    if (plan.pipeline_delay) schedule::delay_schedule(sg, s, plan.pipeline_early);  // See Note [Delayed pipelines]
  } catch (const schedule::ScheduleError& e) {
    throw PlanError(std::string("plan schedule: ") + e.what());
  }
}

// See Note [Recomputation]: a stage that recomputes runs its ops again before
// each backward, so it needs ops that compute; a stage of dataset inputs
// alone keeps nothing that recomputation could drop.
void check_recompute(const Plan& plan, const graph::OpGraph& g) {
  for (const auto& st : plan.stages) {
    if (!st.recompute) continue;
    const bool computes =
        std::any_of(st.ops.begin(), st.ops.end(), [&](const std::string& op) { return !g.op(g.id_of(op)).is_input(); });
    if (!computes)
      throw PlanError("stage " + std::to_string(st.id) +
                      ": recompute is set, but the stage only reads dataset fields and has no forward to run again; "
                      "set recompute false for it");
  }
}

// See Note [Graph ops] in zoo/builder.h: an aggregation reads every node's
// neighbours, so the rows of one graph stay together — a stage that
// aggregates runs each micro-batch (whole graphs) on one device.
// See Note [Node partitions] in nn/node_parts.h: graph parallelism is one
// stage holding the whole model over one graph per step, its replicas each
// owning a range of the nodes.
void check_graph_ops(const Plan& plan, const graph::OpGraph& g) {
  for (const auto& st : plan.stages) {
    const std::string where = "stage " + std::to_string(st.id);
    if (st.partition == "nodes") {
      if (plan.stages.size() != 1 || plan.mini_batch != 1 || st.micro_batch != 1)
        throw PlanError(where + ": partition \"nodes\" (graph parallelism) needs a plan of this one stage and a "
                        "mini_batch of 1 (one graph); this plan has " + std::to_string(plan.stages.size()) +
                        " stages and mini_batch " + std::to_string(plan.mini_batch));
      for (const auto& [param, method] : plan.grad_sync)
        if (method == "sfb")
          throw PlanError(where + ": partition \"nodes\" syncs gradients by allreduce or ps, not sfb ('" + param + "')");
      continue;
    }
    if (st.devices.size() < 2) continue;
    for (const auto& name : st.ops)
      if (g.op(g.id_of(name)).kind == "graph_aggregate")
        throw PlanError(where + ": op '" + name + "' aggregates over graph neighbours, so " +
                        std::to_string(st.devices.size()) + " replicas would cut the graph's nodes apart inside it; a "
                        "stage with graph ops takes one device (split the layers among stages instead), or, as the "
                        "plan's only stage, partition \"nodes\" (graph parallelism)");
  }
}

}  // namespace

void validate_plan(Plan& plan, const graph::OpGraph& g) {
  check_stages(plan);
  const auto stage = stage_of_ops(plan, g);  // every op in exactly one stage, names known
  sort_convex_stages(plan, g);
  const auto sg = rebuild_edges(plan, g, stage);
  check_ratios(plan);
  check_grad_sync(plan, g);
  check_recompute(plan, g);
  check_graph_ops(plan, g);
  check_actions(plan, sg);
  check_sfb_order(plan, g);
}

void check_sfb_order(const Plan& plan, const graph::OpGraph& g) {
  std::set<std::string> sfb;
  for (const auto& [name, method] : plan.grad_sync)
    if (method == cost::to_string(cost::SyncMethod::kSfb)) sfb.insert(name);
  if (sfb.empty()) return;
  for (const auto& st : plan.stages) {
    if (st.devices.size() < 2 || st.actions.empty()) continue;
    const bool any = std::any_of(st.ops.begin(), st.ops.end(), [&](const std::string& op) {
      const auto& params = g.op(g.id_of(op)).params;
      return std::any_of(params.begin(), params.end(), [&](const auto& p) { return sfb.count(p.name) > 0; });
    });
    if (!any) continue;
    const auto actions = schedule::parse_actions(st.actions);
    if (schedule::splits_backward(actions))
      throw PlanError("stage " + std::to_string(st.id) + ": sfb gradient sync does not take a split backward (W in '" +
                      st.actions + "'): SFB captures its factors in backward, which a split runs twice; use "
                      "allreduce or ps for this stage's parameters");
    std::vector<int> forwards, backwards;
    for (const auto& a : actions) {
      if (a.kind == schedule::Action::Kind::kForward) forwards.push_back(a.micro_batch);
      if (a.kind == schedule::Action::Kind::kBackward) backwards.push_back(a.micro_batch);
    }
    if (forwards != backwards)
      throw PlanError("stage " + std::to_string(st.id) +
                      ": sfb gradient sync needs the backwards in the order of the forwards; the schedule is '" +
                      st.actions + "' (use allreduce or ps for this stage's parameters)");
  }
}

std::vector<int> stage_of_devices(const Plan& plan) {
  std::vector<int> stage(static_cast<std::size_t>(std::max(plan.devices, 0)), -1);
  for (const auto& st : plan.stages)
    for (int d : st.devices)
      if (d >= 0 && d < plan.devices) stage[d] = st.id;
  return stage;
}

double stage_transfer_bytes(const Plan& plan, const graph::OpGraph& g) {
  const auto carries = g.carries_gradients();
  double bytes = 0;
  for (const auto& st : plan.stages)  // See Note [Node partitions] in nn/node_parts.h: halo rows
    if (st.partition == "nodes") bytes += gnn::partition_bytes(g, static_cast<int>(st.devices.size()));
  for (const auto& e : plan.edges)
    for (const auto& t : e.tensors) {
      graph::TensorSpec spec{t.shape, graph::dtype_from_string(t.dtype)};
      const auto per_row = static_cast<double>(spec.bytes());
      bytes += per_row * static_cast<double>(plan.mini_batch) * (carries[static_cast<std::size_t>(g.id_of(t.op))] ? 2 : 1);
    }
  return bytes;
}

}  // namespace trident::plan
