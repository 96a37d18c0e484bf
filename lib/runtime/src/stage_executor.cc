#include "trident/runtime/stage_executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <tuple>

#include "trident/data/sampler.h"
#include "trident/schedule/schedule.h"

namespace trident::runtime {

// One tensor crossing an edge (Note [Tags]).
struct StageExecutor::Crossing {
  graph::OpId op = -1;
  int from = 0, to = 0;
  graph::TensorSpec declared;
  bool differentiable = false;  // gradients travel back (float, not a dataset field)
  std::string name;             // "'block1.cat' (stage 0 -> stage 2)"
};

// A contiguous row range of one crossing exchanged with one peer rank.
struct StageExecutor::Piece {
  int k = 0, peer = 0;
  std::int64_t lo = 0, hi = 0;  // rows within the micro-batch
};

namespace {

// A posted p2p operation and its buffer.
struct Posted {
  torch::Tensor buffer;
  c10::intrusive_ptr<c10d::Work> work;
  int peer = 0;
};

std::uint32_t tag(int k, int m, int micro_batches, int direction) {
  return static_cast<std::uint32_t>((static_cast<std::int64_t>(k) * micro_batches + m) * 2 + direction);
}

std::vector<std::int64_t> batch_shape(std::int64_t rows, const graph::TensorSpec& spec) {
  std::vector<std::int64_t> s = {rows};
  s.insert(s.end(), spec.shape.begin(), spec.shape.end());
  return s;
}

}  // namespace

// Where this rank's rows and pieces lie for one micro-batch size (Note [Rows and pieces]).
struct StageExecutor::Layout {
  std::int64_t micro_batch = 0, row_begin = 0, row_end = 0;
  std::vector<Piece> in, out;      // this rank's pieces, receive and send
  std::set<int> input_ks, output_ks;  // the crossings k that in / out cover
};

// The p2p state of one pass: receives posted ahead (Note [Tags]), sends in flight.
struct StageExecutor::Exchange {
  const Layout* layout = nullptr;
  int micro_batches = 0;
  struct Direction {
    const std::vector<Piece>* pieces = nullptr;
    std::vector<int> order;  // micro-batches in the order the actions consume them
    std::size_t next = 0;    // order[next] is the next to post
    std::vector<std::map<int, Posted>> posted;  // per piece: micro-batch -> receive
  } dir[2];
  std::vector<Posted> sends;
  std::map<std::tuple<int, int, int>, std::int64_t> channel;  // emulated: free time per stage pair and direction
};

int StageExecutor::replicas() const {
  return stage_ < 0 ? 0 : static_cast<int>(plan_.stages[stage_].devices.size());
}

StageExecutor::~StageExecutor() = default;

StageExecutor::StageExecutor(nn::GraphModule& module, const plan::Plan& plan, comm::Group world)
    : graph_(module.graph()), module_(&module), plan_(plan), world_(std::move(world)) {
  build();
}

StageExecutor::StageExecutor(const graph::OpGraph& graph, const plan::Plan& plan, comm::Group world,
                             Emulation emulation)
    : graph_(graph), emulation_(std::move(emulation)), plan_(plan), world_(std::move(world)) {
  build();
  if (emulation_->costs.size() != static_cast<int>(plan_.stages.size()))
    throw PipelineError("emulation: the stage graph has " + std::to_string(emulation_->costs.size()) +
                        " stages but the plan " + std::to_string(plan_.stages.size()));
  if (replicas() > 1) {
    auto devices = plan_.stages[stage_].devices;
    std::sort(devices.begin(), devices.end());
    replicas_ = world_.subgroup(devices, "emulated-stage" + std::to_string(stage_));
  }
}

std::string StageExecutor::here() const {
  return "rank " + std::to_string(world_.rank()) + " (stage " + std::to_string(stage_) + ")";
}

void StageExecutor::build() {
  const auto& g = graph_;
  if (world_.size() != plan_.devices)
    throw PipelineError("the plan is for " + std::to_string(plan_.devices) + " devices but " +
                        std::to_string(world_.size()) + " processes were started");
  micro_batches_ = plan_.micro_batches();
  micro_batch_ = plan_.stages.at(0).micro_batch;
  stage_of_device_ = plan::stage_of_devices(plan_);
  stage_ = stage_of_device_.at(world_.rank());
  if (stage_ >= 0) {
    const auto& devices = plan_.stages[stage_].devices;
    replica_ = static_cast<int>(std::find(devices.begin(), devices.end(), world_.rank()) - devices.begin());
  }
  for (const auto& e : plan_.edges) {
    for (const auto& t : e.tensors) {
      Crossing c;
      c.op = g.id_of(t.op);
      c.from = e.from, c.to = e.to;
      c.declared = {t.shape, graph::dtype_from_string(t.dtype)};
      c.differentiable = !g.op(c.op).is_input() && c.declared.dtype != graph::DType::kInt64;
      c.name = "'" + t.op + "' (stage " + std::to_string(e.from) + " -> stage " + std::to_string(e.to) + ")";
      crossings_.push_back(c);
    }
  }
  if (stage_ < 0) return;

  const auto& st = plan_.stages[stage_];
  std::set<graph::OpId> ops;
  for (const auto& name : st.ops) ops.insert(g.id_of(name));
  auto sg = graph::make_subgraph(g, ops);
  has_loss_ = sg.has_loss;
  if (has_loss_) {
    // The loss stage also reports accuracy: it needs the logits and labels,
    // as stage inputs or as extra outputs of its own ops.
    const auto& loss = g.op(g.loss());
    logits_ = loss.inputs.at(0).producer;
    labels_ = loss.inputs.at(1).producer;
    for (auto id : {logits_, labels_})
      if (ops.count(id) && std::find(sg.outputs.begin(), sg.outputs.end(), id) == sg.outputs.end())
        sg.outputs.push_back(id);
  }
  for (auto s : sg.sources) fields_.insert(g.op(s).attrs.value("field", g.op(s).name));
  if (module_) {
    params_ = module_->parameters_of(sg.ops);
    executor_ = std::make_unique<nn::GraphExecutor>(*module_, sg);
  }
  for (const auto& a : schedule::parse_actions(st.actions))
    actions_.emplace_back(a.kind == schedule::Action::Kind::kBackward, a.micro_batch);
  layout(micro_batch_);
}

const StageExecutor::Layout& StageExecutor::layout(std::int64_t micro_batch) {
  auto& slot = layouts_[micro_batch];
  if (slot) return *slot;
  slot = std::make_unique<Layout>();
  auto& l = *slot;
  l.micro_batch = micro_batch;
  auto rows_of = [&](int s, int j) {
    return data::shard_range(micro_batch, j, static_cast<std::int64_t>(plan_.stages[s].devices.size()));
  };
  std::tie(l.row_begin, l.row_end) = rows_of(stage_, replica_);
  for (int k = 0; k < static_cast<int>(crossings_.size()); ++k) {
    const auto& c = crossings_[k];
    auto overlaps = [&](int other, bool receiving) {
      const auto& devs = plan_.stages[other].devices;
      for (int j = 0; j < static_cast<int>(devs.size()); ++j) {
        const auto [lo, hi] = rows_of(other, j);
        const auto a = std::max(lo, l.row_begin), b = std::min(hi, l.row_end);
        if (a < b) (receiving ? l.in : l.out).push_back({k, devs[j], a, b});
      }
    };
    if (c.to == stage_) overlaps(c.from, true);
    if (c.from == stage_) overlaps(c.to, false);
  }
  for (const auto& p : l.in) l.input_ks.insert(p.k);
  for (const auto& p : l.out) l.output_ks.insert(p.k);
  return l;
}

namespace {

// The most micro-batches between their forward and backward at any point of
// `actions`: the stage's in-flight count (at least 1).
int in_flight(const std::vector<std::pair<bool, int>>& actions) {
  int live = 0, most = 1;
  for (const auto& [backward, m] : actions) most = std::max(most, live += backward ? -1 : 1);
  return most;
}

}  // namespace

StageResult StageExecutor::run(const FieldSource& source, double divisor,
                               const std::function<void()>& before_last_backward, TraceLog* trace) {
  if (stage_ < 0) return {};
  return pass(*layouts_.at(micro_batch_), actions_, 0, source, divisor, before_last_backward, trace);
}

StageResult StageExecutor::evaluate(const FieldSource& source, std::int64_t rows) {
  StageResult total;
  if (stage_ < 0 || emulation_) return total;
  torch::NoGradGuard no_grad;
  const std::int64_t chunk = static_cast<std::int64_t>(micro_batches_) * micro_batch_;
  std::vector<std::pair<bool, int>> forwards;
  for (int m = 0; m < micro_batches_; ++m) forwards.emplace_back(false, m);
  for (std::int64_t begin = 0; begin < rows; begin += chunk) {
    const bool full = begin + chunk <= rows;
    const auto& l = layout(full ? micro_batch_ : rows - begin);
    const auto r = pass(l, full ? forwards : std::vector<std::pair<bool, int>>{{false, 0}}, begin, source, 1, {},
                        nullptr);
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
  }
  return total;
}

StageResult StageExecutor::pass(const Layout& l, const std::vector<std::pair<bool, int>>& actions,
                                std::int64_t first_row, const FieldSource& source, double divisor,
                                const std::function<void()>& before_last_backward, TraceLog* trace) {
  StageResult result;
  Exchange x;
  x.layout = &l;
  int last_backward = -1;
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const auto [backward, m] = actions[i];
    x.micro_batches = std::max(x.micro_batches, m + 1);
    x.dir[backward ? 1 : 0].order.push_back(m);
    if (backward) last_backward = i;
  }
  // Activations arrive on the in-pieces, gradients (of differentiable tensors only) on the out-pieces.
  x.dir[0].pieces = &l.in, x.dir[1].pieces = &l.out;
  const int window = in_flight(actions);
  for (int d = 0; d < 2; ++d) {
    x.dir[d].posted.resize(x.dir[d].pieces->size());
    for (int w = 0; w < window; ++w) post_next(x, d);
  }
  std::int64_t last_b_start = 0, last_b_end = 0;
  saved_.clear();
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const auto [backward, m] = actions[i];
    const std::string action = std::string(backward ? "B" : "F") + std::to_string(m);
    if (emulation_) {
      const auto t = emulated_action(x, backward, m, action, trace);
      if (i == last_backward) last_b_start = t.first, last_b_end = t.second;
    } else if (!backward) {
      forward(x, m, first_row, source, result, action, trace);
    } else {
      if (i == last_backward && before_last_backward) before_last_backward();
      this->backward(x, m, divisor, action, trace);
    }
    post_next(x, backward ? 1 : 0);
  }
  for (auto& p : x.sends) {
    try {
      p.work->wait(world_.timeout());
    } catch (const std::exception& e) {
      fail("a send of the last iteration did not complete, to", p.peer, e);
    }
  }
  if (emulation_) emulated_sync(last_b_start, last_b_end, trace);
  return result;
}

void StageExecutor::post_next(Exchange& x, int d) {
  auto& dir = x.dir[d];
  if (dir.next >= dir.order.size()) return;
  const int m = dir.order[dir.next++];
  const auto& pieces = *dir.pieces;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto& c = crossings_[pieces[i].k];
    if (d == 1 && !c.differentiable) continue;
    const auto rows = pieces[i].hi - pieces[i].lo;
    // Emulated messages: [rows, 1] float64, element 0 the modelled arrival (Note [Emulation]).
    auto buffer = emulation_ ? torch::empty({rows, 1}, torch::kFloat64)
                             : torch::empty(batch_shape(rows, c.declared), nn::to_torch(c.declared.dtype));
    std::vector<at::Tensor> v{buffer};
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = world_.pg().recv(v, pieces[i].peer, static_cast<int>(tag(pieces[i].k, m, x.micro_batches, d)));
    } catch (const std::exception& e) {
      fail("could not post the receive of " + std::string(d ? "gradients of " : "activations of ") + c.name +
               " for micro-batch " + std::to_string(m) + " from",
           pieces[i].peer, e);
    }
    dir.posted[i][m] = Posted{buffer, std::move(work), pieces[i].peer};
  }
}

torch::Tensor StageExecutor::take(Exchange& x, int d, std::size_t i, int m, const std::string& action) {
  auto& dir = x.dir[d];
  auto it = dir.posted[i].find(m);
  const auto& piece = (*dir.pieces)[i];
  const auto& c = crossings_[piece.k];
  const std::string what = (d ? "gradients of " : "activations of ") + c.name;
  if (it == dir.posted[i].end())
    throw PipelineError(here() + ": " + action + " needs " + what + " that were never posted (schedule out of order)");
  try {
    it->second.work->wait(world_.timeout());
  } catch (const std::exception& e) {
    fail(action + " waited for " + what + " from", piece.peer, e);
  }
  auto buffer = std::move(it->second.buffer);
  dir.posted[i].erase(it);
  return buffer;
}

// This rank's rows of crossing k for micro-batch m, from its pieces in row order.
torch::Tensor StageExecutor::gather(Exchange& x, int d, int k, int m, const std::string& action) {
  const auto& pieces = *x.dir[d].pieces;
  std::vector<std::pair<std::int64_t, torch::Tensor>> parts;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].k == k) parts.emplace_back(pieces[i].lo, take(x, d, i, m, action));
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<torch::Tensor> ts;
  for (auto& [lo, t] : parts) ts.push_back(t);
  return ts.size() == 1 ? ts[0] : torch::cat(ts);
}

void StageExecutor::send(Exchange& x, const Piece& piece, const torch::Tensor& value, int m, int d) {
  const auto& c = crossings_[piece.k];
  auto slice = value.narrow(0, piece.lo - x.layout->row_begin, piece.hi - piece.lo).detach().contiguous();
  if (!nn::matches(slice, c.declared) || slice.size(0) != piece.hi - piece.lo)
    throw PipelineError(here() + ": micro-batch " + std::to_string(m) + ": edge " + c.name + " declares [" +
                        std::to_string(piece.hi - piece.lo) + (c.declared.shape.empty() ? "" : ",") +
                        graph::to_string(c.declared).substr(1) + " but the stage produced " + nn::describe(slice) +
                        (d ? " as its gradient" : ""));
  post_send(x, piece, slice, m, d);
}

void StageExecutor::post_send(Exchange& x, const Piece& piece, const torch::Tensor& message, int m, int d) {
  std::vector<at::Tensor> v{message};
  try {
    x.sends.push_back(
        {message, world_.pg().send(v, piece.peer, static_cast<int>(tag(piece.k, m, x.micro_batches, d))), piece.peer});
  } catch (const std::exception& e) {
    fail("could not send " + std::string(d ? "gradients of " : "activations of ") + crossings_[piece.k].name +
             " for micro-batch " + std::to_string(m) + " to",
         piece.peer, e);
  }
}

void StageExecutor::fail(const std::string& what, int peer, const std::exception& e) const {
  const auto lost = world_.diagnose();
  throw comm::CommError(here() + ": " + what + " rank " + std::to_string(peer) + " (stage " +
                        std::to_string(stage_of_device_[peer]) + ")" + (lost.empty() ? "" : " (" + lost + ")") +
                        ": " + comm::one_line(e));
}

void StageExecutor::note_wait(std::int64_t t0, std::int64_t t1, const std::string& action, TraceLog* trace) {
  if (trace && t1 - t0 > 50) trace->add("wait " + action, "wait", kComputeLane, t0, t1);
}

void StageExecutor::forward(Exchange& x, int m, std::int64_t first_row, const FieldSource& source,
                            StageResult& result, const std::string& action, TraceLog* trace) {
  const auto& l = *x.layout;
  auto& s = saved_[m];
  const auto t0 = now_us();
  for (int k : l.input_ks) {
    auto t = gather(x, 0, k, m, action);
    if (crossings_[k].differentiable && torch::GradMode::is_enabled()) t.requires_grad_(true);
    s.inputs[crossings_[k].op] = t;
  }
  const auto t1 = now_us();
  note_wait(t0, t1, action, trace);
  if (l.row_end <= l.row_begin) return;  // a short evaluation chunk may leave a replica no rows
  nn::Batch fields;
  const auto base = first_row + m * l.micro_batch;
  if (!fields_.empty()) fields = source(base + l.row_begin, base + l.row_end, fields_);
  s.outputs = executor_->forward(s.inputs, fields);
  for (const auto& p : l.out) send(x, p, s.outputs.at(crossings_[p.k].op), m, 0);
  if (has_loss_) {
    torch::NoGradGuard no_grad;
    result.loss_sum += s.outputs.at(graph_.loss()).item<double>();
    auto value = [&](graph::OpId id) { return s.outputs.count(id) ? s.outputs.at(id) : s.inputs.at(id); };
    result.correct += value(logits_).argmax(1).eq(value(labels_)).sum().item<double>();
  }
  if (!torch::GradMode::is_enabled()) saved_.erase(m);  // evaluation keeps nothing
  if (trace) trace->add(action, "forward", kComputeLane, t1, now_us());
}

void StageExecutor::backward(Exchange& x, int m, double divisor, const std::string& action, TraceLog* trace) {
  const auto& l = *x.layout;
  auto& s = saved_.at(m);
  const auto t0 = now_us();
  std::vector<torch::Tensor> roots, grads;
  if (has_loss_) {
    auto loss = s.outputs.at(graph_.loss());
    roots.push_back(loss);
    grads.push_back(torch::full_like(loss, 1.0 / divisor));
  }
  std::map<graph::OpId, torch::Tensor> out_grads;
  for (int k : l.output_ks) {
    if (!crossings_[k].differentiable) continue;
    auto gk = gather(x, 1, k, m, action);
    auto& acc = out_grads[crossings_[k].op];
    acc = acc.defined() ? acc + gk : gk;
  }
  for (auto& [op, grad] : out_grads) {
    const auto& value = s.outputs.at(op);
    if (value.requires_grad()) roots.push_back(value), grads.push_back(grad);
  }
  const auto t1 = now_us();
  note_wait(t0, t1, action, trace);
  if (!roots.empty()) torch::autograd::backward(roots, grads);
  for (const auto& p : l.in) {
    if (!crossings_[p.k].differentiable) continue;
    const auto& input = s.inputs.at(crossings_[p.k].op);
    send(x, p, input.grad().defined() ? input.grad() : torch::zeros_like(input), m, 1);
  }
  saved_.erase(m);
  if (trace) trace->add(action, "backward", kComputeLane, t1, now_us());
}

// Emulated F or B (Note [Emulation]): wait for the modelled arrivals, wait
// the modelled compute, send modelled arrivals on. Returns the compute span.
std::pair<std::int64_t, std::int64_t> StageExecutor::emulated_action(Exchange& x, bool backward, int m,
                                                                     const std::string& action, TraceLog* trace) {
  const auto& cost = emulation_->costs.stages[stage_];
  const int d = backward ? 1 : 0;
  const auto t0 = now_us();
  std::int64_t arrive = 0;
  const auto& in_pieces = *x.dir[d].pieces;
  for (std::size_t i = 0; i < in_pieces.size(); ++i) {
    if (backward && !crossings_[in_pieces[i].k].differentiable) continue;
    arrive = std::max(arrive, static_cast<std::int64_t>(take(x, d, i, m, action)[0][0].item<double>()));
  }
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(arrive)));
  const auto t1 = now_us();
  note_wait(t0, t1, action, trace);
  const double seconds = backward ? cost.backward_s : cost.forward_s;
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<std::int64_t>(seconds * emulation_->dilation * 1e6)));
  const auto t2 = now_us();
  if (trace) trace->add(action, backward ? "backward" : "forward", kComputeLane, t1, t2);
  // Send on: one channel per stage pair and direction, as in the simulator.
  std::map<std::pair<int, int>, std::int64_t> arrival;  // per edge, this micro-batch
  for (const auto& piece : backward ? x.layout->in : x.layout->out) {
    const auto& c = crossings_[piece.k];
    if (backward && !c.differentiable) continue;
    const auto key = std::make_pair(c.from, c.to);
    if (!arrival.count(key)) {
      double transfer = 0;
      for (const auto& e : emulation_->costs.edges)
        if (e.from == c.from && e.to == c.to) transfer = backward ? e.backward_s : e.forward_s;
      auto& free_at = x.channel[{c.from, c.to, d}];
      const auto start = std::max(now_us(), free_at);
      arrival[key] = free_at = start + static_cast<std::int64_t>(transfer * emulation_->dilation * 1e6);
    }
    auto msg = torch::zeros({piece.hi - piece.lo, 1}, torch::kFloat64);
    msg[0][0] = static_cast<double>(arrival[key]);
    post_send(x, piece, msg, m, d);
  }
  return {t1, t2};
}

void StageExecutor::emulated_sync(std::int64_t b_start, std::int64_t b_end, TraceLog* trace) {
  std::int64_t chain = 0, finish = b_end;
  for (const auto& task : emulation_->costs.stages[stage_].sync) {
    const auto ready = b_start + static_cast<std::int64_t>(task.ready_fraction * static_cast<double>(b_end - b_start));
    const auto start = std::max(ready, chain);
    chain = start + static_cast<std::int64_t>(task.seconds * emulation_->dilation * 1e6);
    if (trace && task.seconds > 0) trace->add("sync " + task.name, "sync", kCommLane, start, chain);
    finish = std::max(finish, chain);
  }
  const auto t0 = now_us();
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(finish)));
  if (replicas_) {
    auto one = torch::ones({1});
    std::vector<at::Tensor> v{one};
    try {
      replicas_->pg().allreduce(v)->wait(replicas_->timeout());
    } catch (const std::exception& e) {
      throw comm::CommError("rank " + std::to_string(world_.rank()) + " (stage " + std::to_string(stage_) +
                            "): the replicas' gradient sync failed: " + comm::one_line(e));
    }
  }
  if (trace && now_us() - t0 > 50) trace->add("wait for sync", "wait", kComputeLane, t0, now_us());
}

std::unique_ptr<comm::GradSync> make_stage_sync(StageExecutor& stage, const plan::Plan& plan, const comm::Group& world,
                                                std::int64_t bucket_bytes, int staleness) {
  if (stage.replicas() < 2) return nullptr;
  auto devices = plan.stages.at(stage.stage()).devices;
  std::sort(devices.begin(), devices.end());
  auto group = world.subgroup(devices, "stage" + std::to_string(stage.stage()));
  std::map<std::string, std::string> methods;
  for (const auto& [name, p] : stage.params()) {
    auto it = plan.grad_sync.find(name);
    methods[name] = it == plan.grad_sync.end() ? "allreduce" : it->second;
  }
  // SFB pairs each micro-batch's captured inputs with its output gradients by
  // position, so the stage must run its backwards in the order of its forwards.
  const bool sfb = std::any_of(methods.begin(), methods.end(), [](const auto& m) { return m.second == "sfb"; });
  if (sfb) {
    std::vector<int> forwards, backwards;
    for (const auto& a : schedule::parse_actions(plan.stages[stage.stage()].actions))
      (a.kind == schedule::Action::Kind::kForward ? forwards : backwards).push_back(a.micro_batch);
    if (forwards != backwards)
      throw PipelineError("stage " + std::to_string(stage.stage()) +
                          ": sfb gradient sync needs the backwards in the order of the forwards; the schedule is '" +
                          plan.stages[stage.stage()].actions + "' (use allreduce or ps for this stage)");
  }
  auto sync = comm::make_hybrid_sync(group, stage.params(), stage.graph(), methods, bucket_bytes, staleness);
  stage.executor().set_observer(sync->observer());
  return sync;
}

}  // namespace trident::runtime
