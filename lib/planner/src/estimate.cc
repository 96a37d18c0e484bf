#include "trident/planner/estimate.h"


#include "trident/schedule/schedule.h"

#include <algorithm>
#include <functional>
#include <set>

namespace trident::planner {

cost::SyncChoice sync_for(const Planner& planner, const graph::Op& op, const graph::ParamSpec& param, int replicas,
                          const cost::LinkSpec& link) {
  const auto& rule = planner.request().grad_sync;
  const std::int64_t samples = planner.request().mini_batch / replicas;
  const auto& device = planner.cluster().device;
  // SFB captures its factors from each layer's output gradient, which a
  // split backward's layer node sees in B and again in W (Note [Split
  // backward at the weights]): not under a zero-bubble schedule.
  if (rule == "hybrid")
    return cost::choose_sync(op, param, samples, replicas, link, device, planner.request().bucket_bytes,
                             planner.request().wire(), !schedule::is_zero_bubble(planner.request().schedule));
  auto method = cost::sync_method_from_string(rule);
  if (method == cost::SyncMethod::kSfb && !cost::sfb_shape(op, param)) method = cost::SyncMethod::kAllReduce;
  return cost::sync_cost(method, op, param, samples, replicas, link, device, planner.request().wire());
}

namespace {

std::int64_t bytes_of(const graph::OpGraph& g, const std::vector<graph::OpId>& ops, const std::string& param) {
  for (auto id : ops)
    for (const auto& p : g.op(id).params)
      if (p.name == param) return p.bytes();
  return 0;
}

}  // namespace

std::vector<int> stage_heights(const graph::OpGraph& g, const std::vector<std::vector<graph::OpId>>& stages,
                               const std::vector<std::pair<graph::OpId, graph::OpId>>& extra,
                               const std::vector<int>& units) {
  const int n = static_cast<int>(stages.size());
  std::vector<int> stage(g.size(), -1);
  for (int i = 0; i < n; ++i)
    for (auto id : stages[i]) stage[id] = i;
  std::vector<std::set<int>> succ(n);
  auto link = [&](graph::OpId a, graph::OpId b) {
    if (stage[a] >= 0 && stage[b] >= 0 && stage[a] != stage[b]) succ[stage[a]].insert(stage[b]);
  };
  for (graph::OpId id = 0; id < g.size(); ++id)
    for (auto c : g.consumers(id)) link(id, c);
  for (const auto& [a, b] : extra) link(a, b);
  std::vector<int> h(n, 0), state(n, 0);  // 0 new, 1 on stack, 2 done
  bool cycle = false;
  std::function<void(int)> visit = [&](int s) {
    state[s] = 1;
    const int own = units.empty() ? 1 : units[s];
    h[s] = own;
    for (int t : succ[s]) {
      if (state[t] == 1) cycle = true;
      if (state[t] == 0) visit(t);
      h[s] = std::max(h[s], h[t] + own);
    }
    state[s] = 2;
  };
  for (int s = 0; s < n; ++s)
    if (!state[s]) visit(s);
  return cycle ? std::vector<int>{} : h;
}

std::vector<StageConfig> stage_configs(const PlanRequest& request, int b, int ratio) {
  const int widest = request.max_replicas > 0 ? std::min(request.devices, request.max_replicas) : request.devices;
  std::vector<StageConfig> out;
  for (int d = 1; d <= widest; d *= 2)
    for (int u = 1; u <= ratio; u *= 2)
      if (request.mini_batch % (b * u) == 0 && (b * u) % d == 0) out.push_back({d, u});
  return out;
}

double input_bytes_per_row(const graph::OpGraph& g, const std::vector<graph::OpId>& ops) {
  std::set<graph::OpId> inside(ops.begin(), ops.end()), counted;
  double bytes = 0;
  for (auto id : ops) {
    const auto& op = g.op(id);
    if (op.is_input()) bytes += static_cast<double>(op.output.bytes());  // a dataset field, kept as read
    for (const auto& in : op.inputs)
      if (!inside.count(in.producer) && counted.insert(in.producer).second)
        bytes += static_cast<double>(g.op(in.producer).output.bytes());
  }
  return bytes;
}

namespace {

// The sync of a replicated stage's gradients, as the runtime runs it: per
// parameter the request's method (or `fixed`'s), ready as the stage's
// backward reaches its op (`backward`: each op's backward seconds, in `ops`'
// order); all-reduced and PS-synced gradients priced per bucket.
void price_sync(const Planner& planner, const std::vector<graph::OpId>& ops, const std::vector<double>& backward,
                int replicas, const cost::LinkSpec& link, const std::map<std::string, std::string>* fixed,
                StageEstimate& e) {
  const auto& g = planner.graph();
  const auto& req = planner.request();
  // WFBP: backward runs from the last op to the first; an op's gradients are
  // ready once its own backward is done. All-reduced and PS-synced
  // gradients travel in buckets as the runtime packs them (see Note [Gradient
  // buckets]; see Note [Sharded parameter server]), each method its own; SFB
  // goes per parameter.
  struct Bucket {
    double bytes = 0, ready = 0;
    int count = 0;
    cost::BucketPacker packer;
  };
  const auto bucket_bytes = static_cast<std::int64_t>(req.bucket_bytes);
  Bucket buckets[2] = {{0, 0, 0, cost::BucketPacker(bucket_bytes)}, {0, 0, 0, cost::BucketPacker(bucket_bytes)}};
  auto flush = [&](int which) {  // prices the open bucket of `which` (all-reduce, PS)
    auto& bucket = buckets[which];
    if (bucket.bytes <= 0) return;
    const double seconds = which == 0 ? cost::allreduce_s(link, bucket.bytes, replicas)
                                      : cost::ps_s(link, bucket.bytes, replicas, req.ps_push_scale);
    e.sync_s += seconds;
    e.sync.push_back({std::string(which == 0 ? "allreduce" : "ps") + " bucket " + std::to_string(bucket.count++),
                      bucket.ready, seconds});
    bucket.bytes = 0;
  };
  double done = 0;
  for (std::size_t i = ops.size(); i-- > 0;) {
    done += backward[i];
    const auto& op = g.op(ops[i]);
    const double ready = e.backward_s > 0 ? done / e.backward_s : 1.0;
    for (auto p = op.params.rbegin(); p != op.params.rend(); ++p) {
      const std::string* forced = nullptr;
      if (fixed) {
        auto it = fixed->find(p->name);
        if (it != fixed->end()) forced = &it->second;
      }
      cost::SyncChoice c;
      if (forced) {
        c = cost::sync_cost(cost::sync_method_from_string(*forced), op, *p, req.mini_batch / replicas, replicas, link,
                            planner.cluster().device, req.wire());
      } else {
        c = sync_for(planner, op, *p, replicas, link);
      }
      e.methods.emplace_back(p->name, c.method);
      if (c.method == cost::SyncMethod::kAllReduce || c.method == cost::SyncMethod::kPs) {
        const int which = c.method == cost::SyncMethod::kAllReduce ? 0 : 1;
        if (buckets[which].packer.add(p->bytes())) flush(which);  // the runtime's packing
        buckets[which].bytes += static_cast<double>(p->bytes()), buckets[which].ready = ready;
        continue;
      }
      e.sync_s += c.seconds;
      e.sync.push_back({p->name, ready, c.seconds});
    }
  }
  flush(0);
  flush(1);
}

}  // namespace

namespace {

// The compute part of a stage estimate: `rows` of each micro-batch on a
// device priced by `cost`; each op's backward in `backward` (if given).
void add_compute(const Planner& planner, const cost::CostModel& cost, const std::vector<graph::OpId>& ops,
                 std::int64_t rows, StageEstimate& e, std::vector<double>* backward) {
  const auto& g = planner.graph();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = g.op(ops[i]);
    e.forward_s += cost.forward_s(op, rows);
    const double b = cost.backward_s(op, rows);
    if (backward) (*backward)[i] = b;
    e.backward_s += b;
    e.weight_grad_s += cost.weight_grad_s(op, rows);
    e.activation_bytes += graph::kept_bytes_per_row(op, planner.dtypes()[static_cast<std::size_t>(ops[i])]) *
                              static_cast<double>(rows) +
                          graph::weight_copy_bytes(op, planner.request().precision);
  }
  e.param_bytes += static_cast<double>(g.param_bytes_of(ops));  // a tied parameter once
  e.input_bytes = input_bytes_per_row(g, ops) * static_cast<double>(rows);
}

// See Note [Node chunks] in nn/node_chunks.h: each chunked aggregation keeps
// its input's row for every node of the graph for the whole run (fp32).
double chunk_cache_bytes(const graph::OpGraph& g, const std::vector<graph::OpId>& ops) {
  double bytes = 0;
  for (auto id : ops) {
    const auto& op = g.op(id);
    if (op.kind == "graph_aggregate" && op.attrs.value("chunks", 0) > 1)
      bytes += 4.0 * static_cast<double>(op.attrs.value("nodes", std::int64_t{0}) * op.output.shape.at(1));
  }
  return bytes;
}

}  // namespace

StageEstimate estimate_stage(const Planner& planner, const std::vector<graph::OpId>& ops, int replicas,
                             int micro_batch, const cost::LinkSpec& link,
                             const std::map<std::string, std::string>* fixed) {
  const auto& g = planner.graph();
  const std::int64_t rows = micro_batch / replicas;
  const auto& req = planner.request();
  StageEstimate e;
  std::vector<double> backward(ops.size());
  add_compute(planner, planner.cost(), ops, rows, e, &backward);
  e.static_bytes = e.param_bytes * (2 + req.optimizer_states) + chunk_cache_bytes(g, ops);
  if (replicas <= 1) return e;
  price_sync(planner, ops, backward, replicas, link, fixed, e);
  // See Note [Sharded parameter server]: a PS-synced parameter's optimizer state
  // lives on its servers, 1/replicas of it on each; under staleness each
  // server also keeps a copy of its share of the weights (see Note [Server copy]).
  // All-reduce keeps a flat buffer per bucket for the whole run, as large as
  // the gradients it syncs; the PS's piece buffers are bounded by a few
  // buckets whatever the model (Note [PS pieces]) and not counted here.
  double ps_params = 0, allreduce_params = 0;
  for (const auto& [name, method] : e.methods) {
    const auto bytes = static_cast<double>(bytes_of(g, ops, name));
    if (method == cost::SyncMethod::kPs) ps_params += bytes;
    if (method == cost::SyncMethod::kAllReduce) allreduce_params += bytes;
  }
  e.static_bytes += allreduce_params;
  e.static_bytes -= ps_params * req.optimizer_states * (1.0 - 1.0 / replicas);
  if (req.staleness > 0 && replicas > 1) e.static_bytes += ps_params / replicas;
  return e;
}

StageEstimate estimate_placed(const Planner& planner, const std::vector<graph::OpId>& ops, const plan::Plan& plan, int stage,
                              const cost::LinkSpec& link, const std::map<std::string, std::string>* fixed) {
  const auto& st = plan.stages.at(static_cast<std::size_t>(stage));
  auto e = estimate_stage(planner, ops, static_cast<int>(st.devices.size()), st.micro_batch, link, fixed);
  double slowest = -1, activations = 0, inputs = 0;
  for (std::size_t j = 0; j < st.devices.size(); ++j) {
    const auto [begin, end] = plan.replica_rows(stage, static_cast<int>(j), st.micro_batch);
    StageEstimate r;
    add_compute(planner, planner.cost_of(st.devices[j]), ops, end - begin, r, nullptr);
    e.per_replica.push_back({r.forward_s, r.backward_s, r.weight_grad_s});
    activations = std::max(activations, r.activation_bytes);
    inputs = std::max(inputs, r.input_bytes);
    if (r.forward_s + r.backward_s <= slowest) continue;
    slowest = r.forward_s + r.backward_s;
    e.forward_s = r.forward_s, e.backward_s = r.backward_s, e.weight_grad_s = r.weight_grad_s;
    e.slowest_device = st.devices[j];
  }
  e.activation_bytes = activations, e.input_bytes = inputs;
  return e;
}

StageEstimate estimate_partitioned(const Planner& planner, const std::vector<graph::OpId>& ops, const plan::PlanStage& stage,
                                   const cost::LinkSpec& link, const std::map<std::string, std::string>* fixed) {
  const int parts = static_cast<int>(stage.devices.size());
  auto e = estimate_stage(planner, ops, parts, stage.micro_batch * parts, link, fixed);  // every replica: whole graphs
  const double share = 1.0 / parts;
  e.forward_s *= share, e.backward_s *= share, e.weight_grad_s *= share;
  e.activation_bytes *= share, e.input_bytes *= share;
  const double halo_s = cost::p2p_s(link, planner.partition_bytes(parts) * share / 2);
  e.forward_s += halo_s, e.backward_s += halo_s;
  return e;
}

}  // namespace trident::planner
