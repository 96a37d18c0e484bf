#include "trident/executor/stage_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>

#include "stage_parts.h"
#include "trident/gnn/graph_data.h"
#include "trident/base/env.h"
#include "trident/base/text.h"
#include "trident/graph/precision.h"
#include "trident/tensor/spec.h"
#include "trident/schedule/schedule.h"

namespace trident::executor {

int StageExecutor::replicas() const {
  return stage_ < 0 ? 0 : static_cast<int>(plan_.stages[stage_].devices.size());
}

StageExecutor::~StageExecutor() = default;

StageExecutor::StageExecutor(nn::GraphModule& module, const plan::Plan& plan, comm::Group world, Placement placement)
    : graph_(module.graph()), module_(&module), plan_(plan), world_(std::move(world)), placement_(std::move(placement)) {
  slowdown_ = slowdown_for_rank(world_.rank());
  build();
  open_links();
  backend_ = std::make_unique<TensorBackend>(*this);
}

StageExecutor::StageExecutor(const graph::OpGraph& graph, const plan::Plan& plan, comm::Group world,
                             Emulation emulation)
    : graph_(graph), plan_(plan), world_(std::move(world)) {
  build();
  if (stage_ >= 0) backend_ = std::make_unique<ClockBackend>(*this, std::move(emulation));
}

double slowdown_for_rank(int rank) {
  const auto text = env_or_empty("TRIDENT_SLOWDOWN");
  if (text.empty()) return 1;
  auto bad = [&](const std::string& why) {
    return PipelineError("TRIDENT_SLOWDOWN = '" + text + "': " + why + "; allowed: RANK:FACTOR[,RANK:FACTOR...], e.g. 1:2",
                         ErrorKind::kBadInput);
  };
  double found = 1;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw bad("'" + item + "' has no ':'");
    char* end = nullptr;
    const long r = std::strtol(item.c_str(), &end, 10);
    if (end != item.c_str() + colon || r < 0) throw bad("'" + item.substr(0, colon) + "' is not a rank");
    const double f = std::strtod(item.c_str() + colon + 1, &end);
    if (*end != 0 || !(f >= 1) || !std::isfinite(f)) throw bad("factor '" + item.substr(colon + 1) + "' must be a number >= 1");
    if (r == rank) found = f;
  }
  return found;
}

ErrorContext StageExecutor::context() const {
  ErrorContext c;
  c.rank = world_.rank();
  if (stage_ >= 0) c.stage = stage_, c.replica = replica_;
  return c;
}

void StageExecutor::build() {
  const auto& g = graph_;
  if (world_.size() != plan_.devices)
    throw PipelineError("the plan is for " + std::to_string(plan_.devices) + " devices but " +
                        std::to_string(world_.size()) + " processes were started",
                        ErrorKind::kBadInput);
  stage_of_device_ = plan::stage_of_devices(plan_);
  stage_ = stage_of_device_.at(world_.rank());
  if (stage_ >= 0) {
    const auto& devices = plan_.stages[stage_].devices;
    replica_ = static_cast<int>(std::find(devices.begin(), devices.end(), world_.rank()) - devices.begin());
  }
  // See Note [Precision policy]: a tensor crosses in the dtype it is computed in.
  const auto computed = graph::computed_dtypes(g, module_ ? module_->precision() : graph::Precision::kFp32);
  for (const auto& e : plan_.edges) {
    for (const auto& t : e.tensors) {
      Crossing c;
      c.op = g.id_of(t.op);
      c.from = e.from, c.to = e.to;
      c.declared = {t.shape, graph::dtype_from_string(t.dtype)};
      if (c.declared.dtype == graph::DType::kFloat32) c.declared.dtype = computed[static_cast<std::size_t>(c.op)];
      c.differentiable = !g.op(c.op).is_input() && c.declared.dtype != graph::DType::kInt64;
      c.name = "'" + t.op + "' (stage " + std::to_string(e.from) + " -> stage " + std::to_string(e.to) + ")";
      crossings_.push_back(c);
    }
  }
  if (stage_ < 0) return;

  const auto& st = plan_.stages[stage_];
  micro_batches_ = plan_.micro_batches(stage_);
  recompute_ = st.recompute;
  std::set<graph::OpId> ops;
  for (const auto& name : st.ops) ops.insert(g.id_of(name));
  auto sg = graph::make_subgraph(g, ops);
  has_loss_ = sg.has_loss;
  if (has_loss_) {
    // The loss stage also reports accuracy: it needs the logits and labels,
    // as stage inputs or as extra outputs of its own ops.
    const auto& loss = g.op(g.loss());
    classifies_ = graph::OpGraph::classifies(loss.kind);
    logits_ = loss.inputs.at(0).producer;
    labels_ = loss.inputs.at(1).producer;
    loss_kind_ = loss.kind;
    ignore_index_ = loss.attrs.value("ignore_index", graph::OpGraph::kIgnoreIndex);
    if (loss.kind == "masked_cross_entropy") mask_ = loss.inputs.at(2).producer;
    for (auto id : {logits_, labels_, mask_})
      if (id >= 0 && ops.count(id) && std::find(sg.outputs.begin(), sg.outputs.end(), id) == sg.outputs.end())
        sg.outputs.push_back(id);
  }
  for (auto s : sg.sources) fields_.insert(g.op(s).attrs.value("field", g.op(s).name));
  if (module_) {
    params_ = module_->parameters_of(sg.ops);
    executor_ = std::make_unique<nn::GraphExecutor>(*module_, sg);
  }
  for (const auto& a : schedule::parse_actions(st.actions))
    if (a.kind != schedule::Action::Kind::kStep) actions_.push_back(a);  // the step follows the last action anyway
  if (delayed()) {  // See Note [Delayed pipelines]; validate_plan checked the whole schedule
    schedule::StageGraph sg;  // the stage DAG: which warm-up forwards may run a step early
    sg.stages.resize(plan_.stages.size());
    for (const auto& e : plan_.edges) sg.edges.push_back({e.from, e.to});
    delayed_ = schedule::delay_schedule(sg, plan::schedule_of(plan_), plan_.pipeline_early).at(static_cast<std::size_t>(stage_));
    if (module_) versions_ = std::make_unique<WeightVersions>(params_, 0);
  }
  layout(0);
  open_node_parts();
  open_node_chunks();
}

namespace {

// The dataset field a masked_cross_entropy loss reads as its mask ("" when none).
std::string mask_field_of(const graph::OpGraph& g) {
  const auto& loss = g.op(g.loss());
  if (loss.kind != "masked_cross_entropy") return "";
  const auto& mask = g.op(loss.inputs.at(2).producer);
  return mask.is_input() ? mask.attrs.value("field", mask.name) : "";
}

}  // namespace

// See Note [Node chunks] in nn/node_chunks.h.
void StageExecutor::open_node_chunks() {
  for (const auto& op : graph_.ops()) {
    const int chunks = op.kind == "graph_aggregate" ? op.attrs.value("chunks", 0) : 0;
    if (chunks < 2) continue;
    auto c = std::make_shared<nn::NodeChunks>();
    c->chunks = chunks, c->bounds = gnn::even_bounds(op.attrs.value("nodes", std::int64_t{0}), chunks);
    node_chunks_ = c;
    break;
  }
  if (node_chunks_ && has_loss_) mask_field_ = mask_field_of(graph_);
}

std::optional<nn::NodeChunkScope> StageExecutor::chunk_scope(std::int64_t first, std::int64_t count, bool training) {
  if (!node_chunks_) return std::nullopt;
  auto c = std::make_shared<nn::NodeChunks>(*node_chunks_);
  c->first = first, c->count = count;
  c->step = random_step_, c->training = training, c->mask_total = chunk_mask_total_;
  return std::optional<nn::NodeChunkScope>(std::in_place, std::move(c));
}

// The whole split's masked count, for the loss stage of a chunked graph.
void StageExecutor::count_masked(const FieldSource& source, std::int64_t first_row, std::int64_t rows) {
  if (!node_chunks_ || !has_loss_ || mask_field_.empty()) return;
  chunk_mask_total_ = source(first_row, first_row + rows, {mask_field_}).at(mask_field_).sum().item<double>();
}

// See Note [Node partitions] in nn/node_parts.h.
void StageExecutor::open_node_parts() {
  const auto& st = plan_.stages[stage_];
  if (st.partition != "nodes") return;
  std::int64_t nodes = 0;
  for (const auto& op : graph_.ops())
    if (op.kind == "graph_aggregate") nodes = op.attrs.value("nodes", std::int64_t{0});
  mask_field_ = mask_field_of(graph_);
  if (nodes <= 0 || mask_field_.empty())
    throw PipelineError("stage " + std::to_string(stage_) + ": partition \"nodes\" needs a graph model (graph_aggregate "
                        "ops and a masked_cross_entropy loss on a dataset mask); '" + graph_.name() + "' is not one",
                        ErrorKind::kBadInput);
  node_parts_ = std::make_shared<nn::NodeParts>();
  node_parts_->part = replica_;
  node_parts_->parts = static_cast<int>(st.devices.size());
  node_parts_->bounds = gnn::even_bounds(nodes, node_parts_->parts);  // contiguous ranges
  node_parts_->exchange = [this](const std::vector<torch::Tensor>& out, const std::vector<std::int64_t>& rows,
                                 std::int64_t width, int direction) { return trade_halo(out, rows, width, direction); };
}

// Halo rows, posted to every peer at once and waited for before the op goes
// on (so calls never interleave and two tags suffice; a partitioned stage is
// its plan's only stage, so no edge tag shares them). out[this part] carries
// the tensors' options.
std::vector<torch::Tensor> StageExecutor::trade_halo(const std::vector<torch::Tensor>& out,
                                                     const std::vector<std::int64_t>& rows, std::int64_t width,
                                                     int direction) {
  constexpr int kHaloTag = 1 << 30;
  const auto& devices = plan_.stages[stage_].devices;
  const auto options = out.at(static_cast<std::size_t>(replica_)).options();
  std::vector<torch::Tensor> got(rows.size());
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, int>> works;
  auto peer = [&](std::size_t q) { return devices.at(q); };
  try {
    for (std::size_t q = 0; q < out.size(); ++q) {
      if (static_cast<int>(q) == replica_ || !out[q].defined() || !out[q].numel()) continue;
      std::vector<at::Tensor> v{out[q]};
      works.push_back({world_.pg().send(v, peer(q), kHaloTag + direction), peer(q)});
      bytes_sent_ += static_cast<std::int64_t>(out[q].nbytes());
    }
    for (std::size_t q = 0; q < rows.size(); ++q) {
      if (static_cast<int>(q) == replica_ || !rows[q]) continue;
      got[q] = torch::empty({rows[q], width}, options);
      std::vector<at::Tensor> v{got[q]};
      works.push_back({world_.pg().recv(v, peer(q), kHaloTag + direction), peer(q)});
    }
  } catch (const std::exception& e) {
    fail(std::string("could not post halo rows (") + (direction ? "gradients" : "features") + ") with", works.empty() ? peer(0) : works.back().second, e);
  }
  for (auto& [work, from] : works) {
    try {
      work->wait(world_.timeout());
    } catch (const std::exception& e) {
      fail(std::string("could not trade halo rows (") + (direction ? "gradients" : "features") + ") with", from, e);
    }
  }
  return got;
}

std::optional<nn::NodePartScope> StageExecutor::node_scope(nn::Batch* fields) {
  if (!node_parts_) return std::nullopt;
  if (fields) {
    if (fields->count(mask_field_)) node_parts_->mask_total = fields->at(mask_field_).sum().item<double>();
    for (auto& [name, t] : *fields) t = t.slice(1, node_parts_->lo(), node_parts_->hi());
  }
  return std::optional<nn::NodePartScope>(std::in_place, node_parts_);
}

void StageExecutor::open_links() {
  if (!placement_.link_per_direction() || crossings_.empty()) return;  // the same on every rank
  std::vector<int> everyone(static_cast<std::size_t>(world_.size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  const int me = world_.rank();
  for (int d = 0; d < 2; ++d) {
    links_.push_back(world_.subgroup(everyone, d ? "gradients" : "activations"));
    std::set<std::tuple<int, int, int, int>> pairs;  // (lower rank, higher rank, sender, receiver)
    for (const auto& c : crossings_) {
      if (d == 1 && !c.differentiable) continue;
      for (int a : plan_.stages[c.from].devices)
        for (int b : plan_.stages[c.to].devices) {
          const int sender = d ? b : a, receiver = d ? a : b;
          pairs.insert({std::min(a, b), std::max(a, b), sender, receiver});
        }
    }
    for (const auto& [lower, higher, sender, receiver] : pairs) {
      if (me != sender && me != receiver) continue;
      std::vector<at::Tensor> one{torch::zeros({1}, torch::TensorOptions().device(placement_.device()))};
      const int peer = me == sender ? receiver : sender;
      try {
        auto& pg = links_.back().pg();
        (me == sender ? pg.send(one, receiver, 0) : pg.recv(one, sender, 0))->wait(world_.timeout());
      } catch (const std::exception& e) {
        fail(std::string("could not open the link for ") + (d ? "gradients" : "activations") +
                 (me == sender ? " to" : " from"),
             peer, e);
      }
    }
  }
}

const StageExecutor::Layout& StageExecutor::layout(std::int64_t uniform) {
  auto& slot = layouts_[uniform];
  if (slot) return *slot;
  slot = std::make_unique<Layout>();
  auto& l = *slot;
  auto size_of = [&](int s) -> std::int64_t { return uniform ? uniform : plan_.stages[s].micro_batch; };
  auto rows_of = [&](int s, int j) { return plan_.replica_rows(s, j, size_of(s)); };  // See Note [Replica shares]
  l.micro_batch = size_of(stage_);
  std::tie(l.row_begin, l.row_end) = rows_of(stage_, replica_);
  l.tag_micro_batches = 1;
  if (!uniform)
    for (int s = 0; s < static_cast<int>(plan_.stages.size()); ++s)
      l.tag_micro_batches = std::max(l.tag_micro_batches, plan_.micro_batches(s));
  for (int k = 0; k < static_cast<int>(crossings_.size()); ++k) {
    const auto& c = crossings_[k];
    auto overlaps = [&](int other, bool receiving) {
      const std::int64_t mine = l.micro_batch, theirs = size_of(other), period = std::max(mine, theirs);
      const auto& devs = plan_.stages[other].devices;
      for (std::int64_t phase = 0; phase < period / mine; ++phase)
        for (std::int64_t at = 0; at < period / theirs; ++at)
          for (int j = 0; j < static_cast<int>(devs.size()); ++j) {
            const auto [lo, hi] = rows_of(other, j);
            const auto a = std::max(at * theirs + lo, phase * mine + l.row_begin);
            const auto b = std::min(at * theirs + hi, phase * mine + l.row_end);
            if (a >= b) continue;
            Piece piece{k, devs[j], a - phase * mine, b - phase * mine, static_cast<int>(phase),
                        static_cast<int>(period / mine)};
            if (mine > theirs) piece.per = static_cast<int>(period / theirs), piece.sub = static_cast<int>(at);
            (receiving ? l.in : l.out).push_back(piece);
          }
    };
    if (c.to == stage_) overlaps(c.from, true);
    if (c.from == stage_) overlaps(c.to, false);
  }
  for (const auto& p : l.in) l.input_ks.insert(p.k), l.input_k_of[crossings_[p.k].op] = p.k;
  for (const auto& p : l.out) l.output_ks.insert(p.k);
  return l;
}

namespace {

using Kind = schedule::Action::Kind;

// The micro-batches whose backward `actions` split (they have a W).
std::set<int> split_of(const std::vector<schedule::Action>& actions) {
  std::set<int> split;
  for (const auto& a : actions)
    if (a.kind == Kind::kWeight) split.insert(a.micro_batch);
  return split;
}

// The most micro-batches between their forward and the end of their
// backward (a split one's W) at any point of `actions`: the stage's
// in-flight count (at least 1).
int in_flight(const std::vector<schedule::Action>& actions, const std::set<int>& split) {
  int live = 0, most = 1;
  for (const auto& a : actions) {
    if (a.kind == Kind::kForward) most = std::max(most, ++live);
    if (a.kind == Kind::kWeight || (a.kind == Kind::kBackward && !split.count(a.micro_batch))) --live;
  }
  return most;
}

}  // namespace

StageResult StageExecutor::run(const FieldSource& source, double divisor,
                               const std::function<void()>& before_last_backward, TraceLog* trace) {
  if (stage_ < 0) return {};
  Pass p;
  p.source = &source, p.divisor = divisor, p.before_last_backward = before_last_backward, p.trace = trace;
  count_masked(source, 0, plan_.mini_batch);
  if (!delayed()) return pass(*layouts_.at(0), actions_, p);
  // See Note [Delayed pipelines]: the warm-up after a drain, then the body or the drain.
  std::vector<schedule::Action> list = warm_ ? std::vector<schedule::Action>{} : delayed_.warmup;
  const auto& rest = drain_ ? delayed_.drain : delayed_.body;
  list.insert(list.end(), rest.begin(), rest.end());
  p.result = next_result_;
  next_result_ = {};
  const auto r = pass(*layouts_.at(0), list, p);
  next_result_ = p.next;
  warm_ = !drain_;
  return r;
}

void StageExecutor::begin_update() {
  if (!versions_) return;
  if (versions_->newest() != random_step_)
    throw PipelineError("the update after step " + std::to_string(random_step_) + " found weight version " +
                        std::to_string(versions_->newest()) + " the newest (expected " + std::to_string(random_step_) + ")",
                        ErrorKind::kFailure, context());
  versions_->begin_update(backend_->versions_in_flight());
}

StageResult StageExecutor::evaluate(const FieldSource& source, std::int64_t rows) {
  StageResult total;
  if (stage_ < 0 || !module_) return total;
  if (warm_)
    throw PipelineError("evaluation while forwards of the next mini-batch are in flight; drain the step before "
                        "(set_drain, Note [Delayed pipelines])", ErrorKind::kFailure, context());
  torch::NoGradGuard no_grad;
  if (node_chunks_) {  // See Note [Pipelined evaluation]: every chunk in one micro-batch
    count_masked(source, 0, rows);
    Pass p;
    p.source = &source;
    return pass(layout(rows), {{Kind::kForward, 0}}, p);
  }
  const std::int64_t chunk = plan_.mini_batch;
  std::vector<schedule::Action> forwards;
  for (int m = 0; m < micro_batches_; ++m) forwards.push_back({Kind::kForward, m});
  for (std::int64_t begin = 0; begin < rows; begin += chunk) {
    const bool full = begin + chunk <= rows;
    Pass p;
    p.source = &source, p.first_row = begin;
    const auto r = pass(layout(full ? 0 : rows - begin),
                        full ? forwards : std::vector<schedule::Action>{{Kind::kForward, 0}}, p);
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
  }
  return total;
}

StageResult StageExecutor::pass(const Layout& l, const std::vector<schedule::Action>& actions, Pass& p) {
  Exchange x;
  x.layout = &l;
  const auto split = split_of(actions);
  int last_weights = -1;  // the action that completes the weight gradients: a whole B or a W
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const auto& a = actions[i];
    if (a.kind != Kind::kWeight) x.dir[a.kind == Kind::kBackward ? 1 : 0].order.push_back(a.micro_batch);
    if (a.kind == Kind::kWeight || (a.kind == Kind::kBackward && !split.count(a.micro_batch))) last_weights = i;
  }
  // Activations arrive on the in-pieces, gradients (of differentiable tensors only) on the out-pieces.
  x.dir[0].pieces = &l.in, x.dir[1].pieces = &l.out;
  // Under a delay a step's list starts with backwards of forwards the step
  // before ran: the synchronous list counts the same micro-batches in flight.
  const int window = std::max(in_flight(actions, split), delayed() ? in_flight(actions_, split_of(actions_)) : 0);
  for (int d = 0; d < 2; ++d) {
    x.dir[d].posted.resize(x.dir[d].pieces->size());
    for (int w = 0; w < window; ++w) post_next(x, d);
  }
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const auto& a = actions[i];
    const int m = a.micro_batch;
    const std::string action = schedule::to_string(a);
    try {
      if (a.kind == Kind::kForward)
        backend_->forward(x, p, m, action);
      else if (a.kind == Kind::kBackward)
        backend_->backward(x, p, m, {i == last_weights, split.count(m) > 0}, action);
      else
        backend_->weight(p, m, i == last_weights, action);
    } catch (Error& e) {
      ErrorContext where = context();
      where.micro_batch = m, where.action = action;
      throw e.add_context(where);
    } catch (const c10::Error& e) {
      // An allocation LibTorch could not make: one line with where, and the plan's figure for this stage.
      if (std::string(e.what()).find("allocate") == std::string::npos) throw;
      ErrorContext where = context();
      where.micro_batch = m, where.action = action;
      const auto& st = plan_.stages[stage_];
      throw PipelineError("out of memory while running " + action + " (the plan predicts " +
                              human_bytes(st.memory_bytes) + " per device for this stage" +
                              (st.recompute ? ", recomputing" : "") +
                              "; more processes, a smaller micro-batch or parallel.recompute may fit): " +
                              first_line(e),
                          ErrorKind::kFailure, where);
    }
    if (a.kind != Kind::kWeight) post_next(x, a.kind == Kind::kBackward ? 1 : 0);
  }
  wait_sends(next_sends_, "a send of the last iteration's next forwards did not complete, to");
  std::vector<Posted> now;
  for (auto& sent : x.sends) (sent.next ? next_sends_ : now).push_back(std::move(sent));
  wait_sends(now, "a send of the last iteration did not complete, to");
  backend_->finish(p);
  return p.result;
}

std::unique_ptr<sync::GradSync> make_stage_sync(StageExecutor& stage, const plan::Plan& plan, const comm::Group& world,
                                                std::int64_t bucket_bytes, int staleness,
                                                const std::set<std::string>& leave, torch::ScalarType ps_push_dtype) {
  if (stage.replicas() < 2) return nullptr;
  sync::NamedParams params;
  for (const auto& p : stage.params())
    if (!leave.count(p.first)) params.push_back(p);
  if (params.empty()) return nullptr;
  const auto& st = plan.stages.at(stage.stage());
  auto devices = st.devices;
  std::sort(devices.begin(), devices.end());
  auto group = world.subgroup(devices, "stage" + std::to_string(stage.stage()));
  std::vector<std::int64_t> shares;  // by member of the group: its replica's rows (See Note [Replica shares])
  if (!st.shares.empty())
    for (int d : devices) {
      const auto j = std::find(st.devices.begin(), st.devices.end(), d) - st.devices.begin();
      shares.push_back(st.shares[static_cast<std::size_t>(j)]);
    }
  std::map<std::string, std::string> methods;
  for (const auto& [name, p] : params) {
    auto it = plan.grad_sync.find(name);
    methods[name] = it == plan.grad_sync.end() ? "allreduce" : it->second;
  }
  plan::check_sfb_order(plan, stage.graph());  // checked before start too; a plan made here is checked again
  auto sync = sync::make_hybrid_sync(group, params, stage.graph(), methods, bucket_bytes, staleness, ps_push_dtype,
                                     std::move(shares));
  stage.executor().set_observer(sync->observer());
  stage.executor().set_gate(sync->gate());
  stage.set_next_forwards([s = sync.get()](bool next) { s->next_forwards(next); });
  return sync;
}

}  // namespace trident::executor
