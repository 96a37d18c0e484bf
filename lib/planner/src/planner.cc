#include "trident/planner/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "trident/planner/estimate.h"
#include "trident/schedule/delayed.h"
#include "trident/base/text.h"
#include "trident/cost/network.h"
#include "trident/graph/sp.h"
#include "trident/gnn/graph_data.h"

namespace trident::planner {
namespace {

std::string gib(double bytes) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  s << bytes / (1024.0 * 1024 * 1024) << " GiB";
  return s.str();
}

}  // namespace

const std::vector<std::string>& partitioner_names() {
  static const std::vector<std::string> names{"graphpipe", "pipedream", "dp", "graph"};
  return names;
}

const std::vector<std::string>& placement_names() {
  static const std::vector<std::string> names{"auto", "class-aware", "as-average", "one-class"};
  return names;
}

const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> names{"auto", "never", "always"};
  return names;
}

Planner::Planner(const graph::OpGraph& graph, cost::ClusterSpec cluster, cost::CostModel cost, PlanRequest request)
    : graph_(graph), cluster_(std::move(cluster)), cost_(std::move(cost)), request_(std::move(request)) {
  auto& r = request_;
  dtypes_ = graph::computed_dtypes(graph_, r.precision);
  if (r.devices < 1) throw plan::PlanError("devices must be >= 1, got " + std::to_string(r.devices));
  if (r.devices > cluster_.capacity())
    throw plan::PlanError("devices " + std::to_string(r.devices) + " is more than cluster " + cluster_.name + " has (" +
                          std::to_string(cluster_.capacity()) + ")");
  if (r.mini_batch < 1) throw plan::PlanError("mini-batch must be >= 1, got " + std::to_string(r.mini_batch));
  if (r.micro_batch && (*r.micro_batch < 1 || r.mini_batch % *r.micro_batch))
    throw plan::PlanError("micro-batch " + std::to_string(*r.micro_batch) + " must divide the mini-batch " +
                          std::to_string(r.mini_batch));
  if (std::find(partitioner_names().begin(), partitioner_names().end(), r.partitioner) == partitioner_names().end())
    throw plan::PlanError("partitioner '" + r.partitioner + "' is unknown; use " + join(partitioner_names()));
  schedule_auto_ = r.schedule.empty();
  if (r.schedule.empty()) r.schedule = r.partitioner == "graphpipe" ? "graph-1f1b" : "1f1b";
  const auto sn = schedule::all_schedule_names();
  if (std::find(sn.begin(), sn.end(), r.schedule) == sn.end())
    throw plan::PlanError("schedule '" + r.schedule + "' is unknown; use " + join(sn));
  if (r.grad_sync == "sfb" && schedule::is_zero_bubble(r.schedule))
    throw plan::PlanError("grad_sync 'sfb' does not take schedule '" + r.schedule +
                          "': SFB captures its factors in backward, which a split backward runs twice; use allreduce, ps "
                    "or hybrid (which then leaves SFB out), or gpipe, 1f1b or graph-1f1b");
  const auto& gs = cost::grad_sync_names();
  if (std::find(gs.begin(), gs.end(), r.grad_sync) == gs.end())
    throw plan::PlanError("grad_sync '" + r.grad_sync + "' is unknown; use " + join(gs));
  const auto& rn = recompute_names();
  if (std::find(rn.begin(), rn.end(), r.recompute) == rn.end())
    throw plan::PlanError("recompute '" + r.recompute + "' is unknown; use " + join(rn));
  if (r.micro_batch_ratio < 0 || (r.micro_batch_ratio & (r.micro_batch_ratio - 1)))
    throw plan::PlanError("micro-batch ratio " + std::to_string(r.micro_batch_ratio) +
                          " must be a power of two (1: one micro-batch size for every stage; 0: the default)");
  ratio_given_ = r.micro_batch_ratio > 0;
  if (r.micro_batch_ratio == 0) r.micro_batch_ratio = r.partitioner == "graphpipe" && !r.micro_batch ? 2 : 1;
  if (r.partitioner == "dp") r.micro_batch_ratio = 1;
  if (r.optimizer_states < 0) throw plan::PlanError("optimizer states must be >= 0");
  if (r.device_memory_bytes && !(*r.device_memory_bytes > 0)) throw plan::PlanError("device memory must be > 0");
  if (!(r.tolerance > 0 && r.tolerance < 1)) throw plan::PlanError("tolerance must be in (0, 1)");
  if (r.max_pieces < 2) throw plan::PlanError("max_pieces must be >= 2");
  if (r.max_replicas < 0) throw plan::PlanError("max replicas must be >= 0 (0: no limit), got " + std::to_string(r.max_replicas));
  const auto& pn = placement_names();
  if (std::find(pn.begin(), pn.end(), r.placement) == pn.end())
    throw plan::PlanError("placement '" + r.placement + "' is unknown; use " + join(pn));
  if (r.placement != "auto" && !cluster_.mixed())
    throw plan::PlanError("placement '" + r.placement + "' applies to a mixed cluster (device classes); cluster " +
                          cluster_.name + " has one kind of device: use auto");
  if (cluster_.mixed())
    for (const auto& c : cluster_.classes) class_costs_.push_back(cost::class_cost_model(cost_, cluster_.device, c));
  if (r.max_replicas > 0 && r.partitioner == "dp" && r.max_replicas < r.devices)
    throw plan::PlanError("max replicas " + std::to_string(r.max_replicas) + " contradicts partitioner dp, which replicates one stage on all " +
                          std::to_string(r.devices) + " devices");
}

double Planner::partition_bytes(int parts) const {
  auto it = partition_bytes_.find(parts);
  if (it == partition_bytes_.end()) it = partition_bytes_.emplace(parts, gnn::partition_bytes(graph_, parts)).first;
  return it->second;
}

double Planner::memory_cap() const {
  return request_.device_memory_bytes ? *request_.device_memory_bytes
                                      : static_cast<double>(cluster_.device.memory_bytes);
}

double Planner::memory_cap(const plan::PlanStage& stage) const {
  if (request_.device_memory_bytes || !cluster_.mixed()) return memory_cap();
  double cap = std::numeric_limits<double>::infinity();
  for (int d : stage.devices) cap = std::min(cap, static_cast<double>(cluster_.device_at(d).memory_bytes));
  return cap;
}

const cost::CostModel& Planner::cost_of(cost::DeviceId device) const {
  return cluster_.mixed() ? class_costs_.at(static_cast<std::size_t>(cluster_.class_index(device))) : cost_;
}


schedule::StageGraph Planner::stage_graph(const plan::Plan& plan) const {
  schedule::StageGraph sg;
  std::vector<std::vector<graph::OpId>> ops(plan.stages.size());
  const int threads = cluster_.threads_per_process(plan.devices, request_.threads);
  for (const auto& st : plan.stages) {
    for (const auto& name : st.ops) ops[st.id].push_back(graph_.id_of(name));
    auto e = st.partition == "nodes"  // See Note [Node partitions]
                 ? estimate_partitioned(*this, ops[st.id], st, cluster_.group_link(st.devices), &plan.grad_sync)
             : cluster_.mixed()  // See Note [Class-aware placement]
                 ? estimate_placed(*this, ops[st.id], plan, st.id, cluster_.group_link(st.devices), &plan.grad_sync)
                 : estimate_stage(*this, ops[st.id], static_cast<int>(st.devices.size()), st.micro_batch,
                                          cluster_.group_link(st.devices), &plan.grad_sync);
    if (st.recompute) e = e.recomputing();  // See Note [Pricing recomputation]
    schedule::StageCost c;
    c.name = "s" + std::to_string(st.id);
    c.replicas = static_cast<int>(st.devices.size());
    c.forward_s = e.forward_s, c.backward_s = e.backward_s;
    // W's time: the weight gradients' own products, as the runtime runs it
    // (Note [Weight pass] in executor/stage_executor.h); B is
    // the rest of the backward. A stage that receives nothing has no input
    // gradients to compute: its B is empty and W is its whole backward.
    c.weight_s = std::min(e.weight_grad_s, e.backward_s);
    const bool source = std::none_of(plan.edges.begin(), plan.edges.end(), [&](const auto& e) { return e.to == st.id; });
    if (source) c.weight_s = e.backward_s;
    for (auto r : e.per_replica) {  // See Note [Class-aware placement]: each replica's own, for emulation
      r.weight_s = source ? r.backward_s : std::min(r.weight_s, r.backward_s);
      c.per_replica.push_back(r);
    }
    c.static_bytes = e.static_bytes, c.activation_bytes = e.activation_bytes;
    c.sync = e.sync;
    int tensors = 0;
    for (auto id : ops[st.id]) tensors += static_cast<int>(graph_.op(id).params.size());
    const auto& slowest = e.slowest_device >= 0 ? cluster_.device_at(e.slowest_device) : cluster_.device;
    c.optimizer_s = cost::optimizer_s(slowest, e.param_bytes, tensors, request_.optimizer_states);
    for (int d : st.devices) c.nodes.push_back(cluster_.node_of(d));
    c.threads = threads;
    sg.stages.push_back(std::move(c));
  }
  sg.cores_per_node = cluster_.cores_per_node;
  // See Note [Core throughput]: the model's own figure, else the machine's.
  sg.core_throughput = cost_.core_throughput();
  if (sg.core_throughput.empty()) sg.core_throughput = cluster_.core_throughput;
  // The step's closing all-reduce of the loss over every process, idle ones
  // included (a few bytes).
  std::vector<int> all(static_cast<std::size_t>(plan.devices));
  for (int d = 0; d < plan.devices; ++d) all[d] = d;
  if (plan.devices > 1) sg.step_s = cost::allreduce_s(cluster_.group_link(all), 3 * sizeof(double), plan.devices);
  for (const auto& e : plan.edges) {
    const auto& a = plan.stages[e.from];
    const auto& b = plan.stages[e.to];
    double fwd = 0, bwd = 0;
    for (const auto& t : e.tensors) {
      const auto id = graph_.id_of(t.op);
      const auto spec = graph::TensorSpec{graph_.op(id).output.shape, dtypes_[static_cast<std::size_t>(id)]};
      fwd += static_cast<double>(spec.bytes());
      if (spec.dtype != graph::DType::kInt64) bwd += static_cast<double>(spec.bytes());
    }
    // Replicas send their row slices at once; the slowest link between the
    // two device groups carries each slice.
    const int lanes = static_cast<int>(std::min(a.devices.size(), b.devices.size()));
    std::vector<int> both = a.devices;
    both.insert(both.end(), b.devices.begin(), b.devices.end());
    const auto& link = cluster_.group_link(both);
    // Activations travel per micro-batch of the sender, gradients per
    // micro-batch of the stage that sends them back (see Note [Micro-batch ratios]).
    const double rows_f = static_cast<double>(a.micro_batch) / lanes, rows_b = static_cast<double>(b.micro_batch) / lanes;
    sg.edges.push_back({e.from, e.to, cost::p2p_s(link, fwd * rows_f), cost::p2p_s(link, bwd * rows_b)});
  }
  return sg;
}

// See Note [Early forwards]: the fastest cap, recorded in the plan; a
// schedule without a delayed form is bad input for a delayed plan, and
// shows no delayed prediction otherwise.
std::optional<schedule::SimResult> Planner::predict_delayed(plan::Plan& plan, const schedule::StageGraph& sg,
                                                             const schedule::Schedule& s) const {
  plan.delayed.reset();
  try {
    auto choice = schedule::choose_delayed(sg, s, plan.mini_batch);
    const auto& d = choice.result;
    plan.delayed = plan::Prediction{d.iteration_s, d.samples_per_s, d.bubble_fraction, d.depth};
    plan.pipeline_early = plan.pipeline_delay ? choice.cap : -1;
    return std::move(choice.result);
  } catch (const schedule::ScheduleError& e) {
    if (plan.pipeline_delay) throw plan::PlanError(std::string("parallel.pipeline_delay = 1: ") + e.what());
    return std::nullopt;
  }
}

schedule::SimResult Planner::predict(plan::Plan& plan) const {
  const auto sg = stage_graph(plan);
  schedule::Schedule s;
  if (std::all_of(plan.stages.begin(), plan.stages.end(), [](auto& st) { return !st.actions.empty(); })) {
    s = plan::schedule_of(plan);
  } else {
    s = schedule::make_schedule(plan.schedule, sg, plan.micro_batch_counts());
    for (auto& st : plan.stages) st.actions = schedule::to_string(s.stages[st.id]);
  }
  auto r = schedule::simulate(sg, s, plan.mini_batch);
  plan.synchronous = plan::Prediction{r.iteration_s, r.samples_per_s, r.bubble_fraction, r.depth};
  // See Note [Delayed pipelines]: a delayed plan predicts its steady state
  // (the search ranks plans as synchronous: make() delays the chosen one).
  std::optional<schedule::SimResult> delayed;
  if (plan.pipeline_delay) delayed = predict_delayed(plan, sg, s);
  for (auto& st : plan.stages) {
    const auto& c = sg.stages[st.id];
    st.in_flight = r.in_flight[st.id];
    st.memory_bytes = r.peak_memory_bytes[st.id];
    std::vector<graph::OpId> ids;
    for (const auto& name : st.ops) ids.push_back(graph_.id_of(name));
    st.param_bytes = static_cast<double>(graph_.param_bytes_of(ids));  // a tied parameter once
    st.activation_bytes = c.activation_bytes;
    st.forward_s = c.forward_s, st.backward_s = c.backward_s;
    st.sync_s = 0;
    for (const auto& t : c.sync) st.sync_s += t.seconds;
    st.predicted_tps_s = (c.forward_s + c.backward_s) / st.micro_batch + st.sync_s / plan.mini_batch;
    if (plan.pipeline_delay) st.memory_bytes += st.param_bytes;  // the second weight version
  }
  if (plan.pipeline_delay && delayed) r = *delayed;
  plan.predicted = {r.iteration_s, r.samples_per_s, r.bubble_fraction, r.depth};
  return r;
}

void Planner::stamp(plan::Plan& plan) const {
  plan.cluster = cluster_.to_json(false);
  plan.cost_model = cost_.describe();
}

std::vector<Planner::StageChoice> Planner::ordered_stages(const std::vector<StageChoice>& stages) const {
  const int n = static_cast<int>(stages.size());
  std::vector<int> stage(graph_.size(), -1);
  for (int i = 0; i < n; ++i)
    for (auto id : stages[i].ops) stage[id] = i;
  schedule::StageGraph dag;
  dag.stages.resize(n);
  std::set<std::pair<int, int>> seen;
  for (graph::OpId id = 0; id < graph_.size(); ++id)
    for (auto c : graph_.consumers(id))
      if (stage[id] >= 0 && stage[id] != stage[c] && seen.insert({stage[id], stage[c]}).second)
        dag.edges.push_back({stage[id], stage[c]});
  const auto order = dag.topo_order();
  if (static_cast<int>(order.size()) != n)
    throw plan::PlanError("the stages' dependencies form a cycle (a stage is not convex); split or merge stages so that "
                          "they form a DAG");
  // Input ops the search left out join their earliest consumer's stage, which
  // keeps every stage convex and the stage graph acyclic.
  std::vector<int> position(n);
  for (int i = 0; i < n; ++i) position[order[i]] = i;
  std::vector<StageChoice> ordered(n);
  for (int i = 0; i < n; ++i) ordered[i] = stages[order[i]];
  for (graph::OpId id = 0; id < graph_.size(); ++id) {
    if (stage[id] >= 0) continue;
    int best = -1;
    for (auto c : graph_.consumers(id))
      if (stage[c] >= 0 && (best < 0 || position[stage[c]] < position[best])) best = stage[c];
    if (best < 0) throw plan::PlanError("internal: op '" + graph_.op(id).name + "' is in no stage", ErrorKind::kFailure);
    stage[id] = best;
    ordered[position[best]].ops.push_back(id);
  }
  for (auto& st : ordered) std::sort(st.ops.begin(), st.ops.end());
  return ordered;
}

void Planner::place_devices(plan::Plan& plan, const std::vector<StageChoice>& ordered) const {
  // Power-of-two groups largest first, so none straddles a node it fits in.
  std::vector<int> by_size(ordered.size());
  for (std::size_t i = 0; i < ordered.size(); ++i) by_size[i] = static_cast<int>(i);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int a, int b) { return ordered[a].replicas > ordered[b].replicas; });
  int next = 0;
  for (int i : by_size)
    for (int r = 0; r < ordered[i].replicas; ++r) plan.stages[i].devices.push_back(next++);
  if (next > request_.devices)
    throw plan::PlanError("internal: plan uses " + std::to_string(next) + " devices of " + std::to_string(request_.devices),
                          ErrorKind::kFailure);
}

void Planner::fit_memory(plan::Plan& plan) const {
  // See Note [Pricing recomputation]: under auto, the stages that do not fit
  // recompute; the schedule, and so the in-flight counts, stay the same.
  if (request_.recompute == "auto") {
    bool any = false;
    for (auto& st : plan.stages)
      if (st.memory_bytes > memory_cap(st)) st.recompute = any = true;
    if (any) predict(plan);
  }
  for (const auto& st : plan.stages) {
    if (st.memory_bytes > memory_cap(st))
      throw plan::PlanError("no feasible plan: stage " + std::to_string(st.id) + " (" + std::to_string(st.ops.size()) +
                            " ops, " + st.ops.front() + " .. " + st.ops.back() + ") needs " + gib(st.memory_bytes) +
                            " per device (" + gib(st.memory_bytes - st.in_flight * st.activation_bytes) +
                            (st.recompute ? " weights, gradients, optimizer state and one forward's activations, "
                                    : " weights, gradients and optimizer state, ") +
                      std::to_string(st.in_flight) + " x " + gib(st.activation_bytes) +
                      (st.recompute ? " kept inputs (recomputing)" : " activations") + "), over the " +
                      gib(memory_cap(st)) + " of a " + cluster_.device_at(st.devices.front()).name);
  }
}

plan::Plan Planner::assemble(const std::vector<StageChoice>& stages, int micro_batch, const std::string& partitioner) const {
  const auto ordered = ordered_stages(stages);
  plan::Plan plan;
  plan.model = request_.model, plan.preset = request_.preset, plan.model_file = request_.model_file;
  plan.model_graph = request_.model_graph, plan.graph_chunks = request_.graph_chunks;
  plan.fanouts = request_.fanouts, plan.sample_replace = request_.sample_replace, plan.hidden = request_.hidden;
  plan.node_embedding = request_.node_embedding;
  plan.devices = request_.devices, plan.mini_batch = request_.mini_batch;
  plan.partitioner = partitioner, plan.schedule = request_.schedule;
  plan.optimizer_states = request_.optimizer_states;
  plan.precision = graph::to_string(request_.precision);
  plan.comm_dtype = request_.ps_push_scale < 1 ? "bf16" : "fp32";  // See Note [Push dtype]
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    plan::PlanStage st;
    st.id = static_cast<int>(i);
    st.micro_batch = ordered[i].micro_batch > 0 ? ordered[i].micro_batch : micro_batch;
    st.recompute = request_.recompute == "always";
    st.partition = ordered[i].partition;
    for (auto id : ordered[i].ops) st.ops.push_back(graph_.op(id).name);
    plan.stages.push_back(std::move(st));
  }
  place_devices(plan, ordered);
  plan::validate_plan(plan, graph_);
  fill_sync(plan);
  predict(plan);
  fit_memory(plan);
  return plan;
}

void Planner::fill_sync(plan::Plan& plan) const {
  // By the request's rule on each stage's own link.
  for (const auto& st : plan.stages) {
    if (st.devices.size() < 2) continue;
    for (const auto& name : st.ops) {
      const auto& op = graph_.op(graph_.id_of(name));
      for (const auto& p : op.params) {
        if (plan.grad_sync.count(p.name)) continue;
        auto method = cost::to_string(
            sync_for(*this, op, p, static_cast<int>(st.devices.size()), cluster_.group_link(st.devices)).method);
        if (st.partition == "nodes" && method == "sfb") method = "allreduce";  // node rows are not a batch's factors
        plan.grad_sync[p.name] = method;
      }
    }
  }
}

// Why no plan was found: the candidates' reasons, else the op or the model
// that cannot fit.
void Planner::no_plan(const std::vector<std::string>& reasons, int b) const {
  if (!reasons.empty()) {
    const auto others = reasons.size() - 1;
    throw plan::PlanError(reasons.front() + (others ? " (and " + std::to_string(others) + " other reason" +
                                                    (others > 1 ? "s" : "") + ": " + reasons[1] + ")"
                                              : std::string()));
  }
  for (graph::OpId id = 0; id < graph_.size(); ++id) {
    auto e = estimate_stage(*this, {id}, 1, b, cluster_.intra_node);
    if (e.memory(1) > memory_cap())
      throw plan::PlanError("no feasible plan: op '" + graph_.op(id).name + "' alone needs " + gib(e.memory(1)) +
                            " on one device at micro-batch " + std::to_string(b) + ", over the " + gib(memory_cap()) +
                            " of a " + cluster_.device.name + "; raise --device-memory-gb or use a smaller preset");
  }
  std::vector<graph::OpId> all(graph_.size());
  for (graph::OpId id = 0; id < graph_.size(); ++id) all[id] = id;
  const double total = estimate_stage(*this, all, 1, b, cluster_.intra_node).static_bytes;
  throw plan::PlanError("no feasible plan: " + graph_.name() + " needs " + gib(total) +
                        " for weights, gradients and optimizer state plus activations, and no split into stages fits on " +
                        std::to_string(request_.devices) + " devices of " + gib(memory_cap()) +
                        "; add devices or raise --device-memory-gb");
}

void Planner::override_sync(plan::Plan& plan) const {
  if (request_.sync_overrides.empty()) return;
  std::set<std::string> known;
  for (const auto& op : graph_.ops())
    for (const auto& p : op.params) known.insert(p.name);
  for (const auto& [name, method] : request_.sync_overrides) {
    if (!known.count(name))
      throw plan::PlanError("parallel.sync names '" + name + "', which is not a parameter of " + graph_.name() +
                            " (see `trident graph --model " + graph_.name() + " --ops`)");
    plan.grad_sync[name] = method;
  }
  try {
    plan::validate_plan(plan, graph_);
  } catch (const plan::PlanError& e) {
    throw plan::PlanError(std::string("parallel.sync: ") + e.what(), e.kind());
  }
}

plan::Plan Planner::make(std::optional<plan::Plan> given) const {
  plan::Plan p = given ? std::move(*given) : plan();  // plan() predicts and stamps its result
  if (given) {  // a plan file's: checked against the graph and the request
    plan::validate_plan(p, graph_);
    if (p.model != request_.model || p.preset != request_.preset)
      throw plan::PlanError("the plan is for " + p.model + "/" + p.preset + ", not " + request_.model + "/" + request_.preset);
    if (p.devices != request_.devices)
      throw plan::PlanError("the plan is for " + std::to_string(p.devices) + " devices, not " +
                            std::to_string(request_.devices) + "; run it on " + std::to_string(p.devices) +
                            " processes or plan again");
    if (p.mini_batch != request_.mini_batch)
      throw plan::PlanError("the plan is for mini-batch " + std::to_string(p.mini_batch) + ", not " +
                            std::to_string(request_.mini_batch));
    p.model_file = request_.model_file;
    p.model_graph = request_.model_graph, p.graph_chunks = request_.graph_chunks;
    p.fanouts = request_.fanouts, p.sample_replace = request_.sample_replace, p.hidden = request_.hidden;
    p.node_embedding = request_.node_embedding;
    fill_sync(p);  // methods the plan leaves out: the request's rule
  }
  p.pipeline_delay = request_.pipeline_delay;  // the run's setting, whatever a plan file says
  if (given || p.pipeline_delay || !request_.sync_overrides.empty()) {
    override_sync(p);
    predict(p);  // for this planner's cluster, shown beside the measurements
    stamp(p);
  }
  if (!p.pipeline_delay && p.stages.size() > 1) {  // the delayed prediction beside the synchronous one
    const auto sg = stage_graph(p);
    predict_delayed(p, sg, plan::schedule_of(p));
  }
  plan::check_sfb_order(p, graph_);  // now that the actions and sync methods are known
  return p;
}

namespace {

struct Space {
  graph::SpDecomposition sp;
  std::string name;
  int ratio = 0;  // micro-batch ratio (0: the request's)
};

std::vector<Space> search_spaces(const graph::OpGraph& g, const std::string& partitioner, int ratio,
                                 bool ratio_given) {
  std::vector<Space> spaces;
  if (partitioner == "graphpipe") {
    spaces.push_back({graph::sp_decompose(g, /*skip_inputs=*/true), "series-parallel", 1});
    if (ratio > 1 && (ratio_given || !spaces.back().sp.root.is_chain())) {
      Space mixed{spaces.back().sp, "series-parallel", ratio};
      spaces.push_back(std::move(mixed));
    }
  }
  if (partitioner != "dp" && partitioner != "graph") {
    auto chain = graph::linearize(g, /*skip_inputs=*/true);
    // A sequential model decomposes into the same chain: search it once.
    if (spaces.empty() || graph::to_string(spaces[0].sp.root) != graph::to_string(chain.root))
      spaces.push_back({std::move(chain), "sequential", 1});
  }
  return spaces;
}

// The requested micro-batch, else every power of two dividing the
// mini-batch, largest first: they run most efficiently, so a good plan is
// found early and bounds the search at smaller ones.
std::vector<int> micro_batch_candidates(const PlanRequest& r) {
  if (r.micro_batch) return {*r.micro_batch};
  std::vector<int> out;
  for (int b = 1; b <= r.mini_batch; b *= 2)
    if (r.mini_batch % b == 0) out.push_back(b);
  std::reverse(out.begin(), out.end());
  return out;
}

// dp's one stage: every device when the micro-batch splits evenly among
// them, else the largest power of two of them that it does.
std::vector<Planner::StageChoice> data_parallel(const graph::OpGraph& g, int devices, int b) {
  int d = 1;
  while (d * 2 <= devices && b % (d * 2) == 0) d *= 2;
  if (b % devices == 0) d = devices;
  std::vector<graph::OpId> all(g.size());
  for (graph::OpId id = 0; id < g.size(); ++id) all[id] = id;
  return {{all, d}};
}

}  // namespace

plan::Plan Planner::plan() const {
  if (cluster_.mixed()) return plan_mixed();
  const auto start = std::chrono::steady_clock::now();
  const auto micro_batches = micro_batch_candidates(request_);
  const auto spaces = search_spaces(graph_, request_.partitioner, request_.micro_batch_ratio, ratio_given_);
  std::optional<plan::Plan> best;
  std::vector<std::string> reasons;  // why candidates were rejected, each once
  // See Note [Search spaces], reported: the best plan of each space, each space
  // bounded by its own best so that both answers are exact.
  std::vector<std::optional<plan::Plan>> best_in(spaces.size());
  auto consider = [&](const std::vector<StageChoice>& stages, int b, int space) {
    try {
      plan::Plan p = assemble(stages, b, request_.partitioner);
      if (space >= 0) {
        p.space = spaces[space].name;
        auto& mine = best_in[space];
        if (!mine || p.predicted.samples_per_s > mine->predicted.samples_per_s) mine = p;
      }
      if (!best || p.predicted.samples_per_s > best->predicted.samples_per_s) best = std::move(p);
    } catch (const plan::PlanError& e) {
      // A candidate that breaks an invariant is a bug in the search: never
      // hidden behind another candidate that happens to succeed.
      if (e.kind() == ErrorKind::kFailure) throw;
      if (std::find(reasons.begin(), reasons.end(), e.message()) == reasons.end()) reasons.push_back(e.message());
    }
  };
  for (int b : micro_batches) {
    if (request_.partitioner == "dp") consider(data_parallel(graph_, request_.devices, b), b, -1);
    // See Note [Node partitions] in nn/node_parts.h: graph parallelism, asked
    // for, or beside graphpipe's layer splits of a GNN (the faster wins).
    const bool gnn = std::any_of(graph_.ops().begin(), graph_.ops().end(),
                                 [](const graph::Op& op) { return op.kind == "graph_aggregate"; });
    if (request_.partitioner == "graph" ||
        (request_.partitioner == "graphpipe" && gnn && request_.devices > 1 && request_.mini_batch == 1))
      consider({{data_parallel(graph_, 1, b)[0].ops, request_.devices, b, "nodes"}}, b, -1);
    for (std::size_t i = 0; i < spaces.size(); ++i) {
      // Bounded by the best plan of its space (both series-parallel searches: one space).
      double bound = std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < spaces.size(); ++j)
        if (best_in[j] && spaces[j].name == spaces[i].name) bound = std::min(bound, best_in[j]->predicted.iteration_s);
      for (const auto& c : candidates(spaces[i].sp, b, bound, spaces[i].ratio)) consider(c.stages, b, static_cast<int>(i));
    }
  }
  if (!best) no_plan(reasons, micro_batches.front());
  best = with_best_schedule(std::move(*best));
  for (std::size_t i = 0; i < spaces.size(); ++i)
    if (best_in[i] && (!best->space_best.count(spaces[i].name) ||
                       best_in[i]->predicted.samples_per_s > best->space_best[spaces[i].name].samples_per_s))
      best->space_best[spaces[i].name] = best_in[i]->predicted;
  best->search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stamp(*best);
  return *best;
}

plan::Plan Planner::with_best_schedule(plan::Plan base) const {
  constexpr double kMargin = 0.01;
  // A delayed pipeline runs 1F1B's lists (Note [Delayed pipelines]): no zero-bubble schedule.
  if (!schedule_auto_ || base.stages.size() < 2 || request_.grad_sync == "sfb" || request_.pipeline_delay) return base;
  std::vector<StageChoice> stages;
  for (const auto& st : base.stages) {
    StageChoice c;
    for (const auto& name : st.ops) c.ops.push_back(graph_.id_of(name));
    c.replicas = static_cast<int>(st.devices.size()), c.micro_batch = st.micro_batch;
    stages.push_back(std::move(c));
  }
  const std::vector<std::string> names =
      request_.partitioner == "graphpipe" ? std::vector<std::string>{"graph-zb"} : std::vector<std::string>{"zb-h1", "zb-h2"};
  std::map<std::string, plan::Prediction> tried{{base.schedule, base.predicted}};
  plan::Plan best = base;
  for (const auto& name : names) {
    Planner other = *this;
    other.request_.schedule = name;
    plan::Plan p;
    try {
      p = other.assemble(stages, base.stages.front().micro_batch, base.partitioner);
    } catch (const plan::PlanError& e) {
      if (e.kind() == ErrorKind::kFailure) throw;
      continue;  // does not fit under this schedule
    }
    tried[name] = p.predicted;
    if (p.predicted.samples_per_s > (1 + kMargin) * base.predicted.samples_per_s &&
        p.predicted.samples_per_s > best.predicted.samples_per_s) {
      p.space = base.space;
      best = std::move(p);
    }
  }
  best.schedule_best = std::move(tried);
  return best;
}

}  // namespace trident::planner
