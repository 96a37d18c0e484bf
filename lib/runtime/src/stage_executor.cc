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
  std::map<graph::OpId, int> input_k_of;  // the producer op of each received crossing -> its k
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

// Note [Action backends]: pass() interprets a stage's schedule actions — it
// posts receives ahead (Note [Tags]), hands each action to the backend,
// posts the next receives, and at the end waits for the sends — and knows
// nothing of what an action computes. The backend does: TensorBackend runs
// the stage's modules on real rows; ClockBackend (Note [Emulation]) waits
// modelled times and sends modelled arrival times. Both exchange through the
// same pieces and tags, so an emulated run exercises the real protocol.
struct StageExecutor::Pass {
  const FieldSource* source = nullptr;
  double divisor = 1;
  std::int64_t first_row = 0;  // micro-batch m's rows start at first_row + m·micro_batch
  std::function<void()> before_last_backward;
  TraceLog* trace = nullptr;
  StageResult result;
};

class StageExecutor::Backend {
 public:
  explicit Backend(StageExecutor& stage) : s_(stage) {}
  virtual ~Backend() = default;
  // A receive buffer for `rows` rows of crossing c.
  virtual torch::Tensor buffer(const Crossing& c, std::int64_t rows) const = 0;
  virtual void forward(Exchange& x, Pass& p, int m, const std::string& action) = 0;
  virtual void backward(Exchange& x, Pass& p, int m, bool last, const std::string& action) = 0;
  // After every action and send of the pass.
  virtual void finish(Pass&) {}

 protected:
  StageExecutor& s_;
};

class StageExecutor::TensorBackend final : public Backend {
 public:
  using Backend::Backend;
  torch::Tensor buffer(const Crossing& c, std::int64_t rows) const override {
    return torch::empty(batch_shape(rows, c.declared),
                        torch::TensorOptions().dtype(nn::to_torch(c.declared.dtype)).device(s_.placement_.wire()));
  }
  void forward(Exchange& x, Pass& p, int m, const std::string& action) override;
  void backward(Exchange& x, Pass& p, int m, bool last, const std::string& action) override;
  void finish(Pass&) override { saved_.clear(); }

 private:
  struct Saved {
    nn::TensorMap inputs, outputs;
  };
  std::map<int, Saved> saved_;  // micro-batches between their forward and backward
};

class StageExecutor::ClockBackend final : public Backend {
 public:
  ClockBackend(StageExecutor& stage, Emulation emulation);
  // [rows, 1] float64; element 0 is the modelled arrival in system-clock µs.
  torch::Tensor buffer(const Crossing&, std::int64_t rows) const override {
    return torch::empty({rows, 1}, torch::kFloat64);
  }
  void forward(Exchange& x, Pass& p, int m, const std::string& action) override { act(x, p, false, m, action); }
  void backward(Exchange& x, Pass& p, int m, bool last, const std::string& action) override {
    const auto span = act(x, p, true, m, action);
    if (last) last_backward_ = span;
  }
  void finish(Pass& p) override;

 private:
  // Waits for the modelled arrivals, waits the modelled compute, sends
  // modelled arrivals on; returns the compute span (µs).
  std::pair<std::int64_t, std::int64_t> act(Exchange& x, Pass& p, bool backward, int m, const std::string& action);
  // A modelled duration, stretched by the dilation, in µs.
  std::int64_t scaled_us(double seconds) const {
    return static_cast<std::int64_t>(seconds * emulation_.dilation * 1e6);
  }
  Emulation emulation_;
  std::optional<comm::Group> replicas_;  // for the closing all-reduce
  std::pair<std::int64_t, std::int64_t> last_backward_{0, 0};
  std::map<std::tuple<int, int, int>, std::int64_t> channel_;  // free time per stage pair and direction
};

int StageExecutor::replicas() const {
  return stage_ < 0 ? 0 : static_cast<int>(plan_.stages[stage_].devices.size());
}

StageExecutor::~StageExecutor() = default;

StageExecutor::StageExecutor(nn::GraphModule& module, const plan::Plan& plan, comm::Group world, Placement placement)
    : graph_(module.graph()), module_(&module), plan_(plan), world_(std::move(world)), placement_(std::move(placement)) {
  build();
  backend_ = std::make_unique<TensorBackend>(*this);
}

StageExecutor::StageExecutor(const graph::OpGraph& graph, const plan::Plan& plan, comm::Group world,
                             Emulation emulation)
    : graph_(graph), plan_(plan), world_(std::move(world)) {
  build();
  if (stage_ >= 0) backend_ = std::make_unique<ClockBackend>(*this, std::move(emulation));
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
    classifies_ = loss.kind == "cross_entropy";
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
  for (const auto& p : l.in) l.input_ks.insert(p.k), l.input_k_of[crossings_[p.k].op] = p.k;
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
  Pass p;
  p.source = &source, p.divisor = divisor, p.before_last_backward = before_last_backward, p.trace = trace;
  return pass(*layouts_.at(micro_batch_), actions_, p);
}

StageResult StageExecutor::evaluate(const FieldSource& source, std::int64_t rows) {
  StageResult total;
  if (stage_ < 0 || !module_) return total;
  torch::NoGradGuard no_grad;
  const std::int64_t chunk = static_cast<std::int64_t>(micro_batches_) * micro_batch_;
  std::vector<std::pair<bool, int>> forwards;
  for (int m = 0; m < micro_batches_; ++m) forwards.emplace_back(false, m);
  for (std::int64_t begin = 0; begin < rows; begin += chunk) {
    const bool full = begin + chunk <= rows;
    Pass p;
    p.source = &source, p.first_row = begin;
    const auto r = pass(layout(full ? micro_batch_ : rows - begin),
                        full ? forwards : std::vector<std::pair<bool, int>>{{false, 0}}, p);
    total.loss_sum += r.loss_sum;
    total.correct += r.correct;
  }
  return total;
}

StageResult StageExecutor::pass(const Layout& l, const std::vector<std::pair<bool, int>>& actions, Pass& p) {
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
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const auto [backward, m] = actions[i];
    const std::string action = std::string(backward ? "B" : "F") + std::to_string(m);
    try {
      if (backward)
        backend_->backward(x, p, m, i == last_backward, action);
      else
        backend_->forward(x, p, m, action);
    } catch (Error& e) {
      ErrorContext where = context();
      where.micro_batch = m, where.action = action;
      throw e.add_context(where);
    }
    post_next(x, backward ? 1 : 0);
  }
  for (auto& sent : x.sends) {
    try {
      sent.work->wait(world_.timeout());
    } catch (const std::exception& e) {
      fail("a send of the last iteration did not complete, to", sent.peer, e);
    }
  }
  backend_->finish(p);
  return p.result;
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
    auto buffer = backend_->buffer(c, rows);
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

torch::Tensor StageExecutor::take(Exchange& x, int d, std::size_t i, int m) {
  auto& dir = x.dir[d];
  auto it = dir.posted[i].find(m);
  const auto& piece = (*dir.pieces)[i];
  const auto& c = crossings_[piece.k];
  const std::string what = (d ? "gradients of " : "activations of ") + c.name;
  if (it == dir.posted[i].end())
    throw PipelineError("needs " + what + " that were never posted (schedule out of order)", ErrorKind::kFailure);
  try {
    it->second.work->wait(world_.timeout());
  } catch (const std::exception& e) {
    fail("waited for " + what + " from", piece.peer, e);
  }
  auto buffer = std::move(it->second.buffer);
  dir.posted[i].erase(it);
  return placement_.arrived(buffer);
}

// This rank's rows of crossing k for micro-batch m, from its pieces in row order.
torch::Tensor StageExecutor::gather(Exchange& x, int d, int k, int m) {
  const auto& pieces = *x.dir[d].pieces;
  std::vector<std::pair<std::int64_t, torch::Tensor>> parts;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].k == k) parts.emplace_back(pieces[i].lo, take(x, d, i, m));
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<torch::Tensor> ts;
  for (auto& [lo, t] : parts) ts.push_back(t);
  return ts.size() == 1 ? ts[0] : torch::cat(ts);
}

void StageExecutor::send(Exchange& x, const Piece& piece, const torch::Tensor& value, int m, int d) {
  const auto& c = crossings_[piece.k];
  auto slice = value.narrow(0, piece.lo - x.layout->row_begin, piece.hi - piece.lo).detach().contiguous();
  if (!nn::matches(slice, c.declared) || slice.size(0) != piece.hi - piece.lo)
    throw PipelineError("edge " + c.name + " declares [" +
                        std::to_string(piece.hi - piece.lo) + (c.declared.shape.empty() ? "" : ",") +
                        graph::to_string(c.declared).substr(1) + " but the stage produced " + nn::describe(slice) +
                        (d ? " as its gradient" : ""));
  post_send(x, piece, placement_.departing(slice), m, d);
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
  throw comm::CommError(what + " rank " + std::to_string(peer) + " (stage " + std::to_string(stage_of_device_[peer]) +
                            ")" + (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e),
                        ErrorKind::kFailure, context());
}

void StageExecutor::TensorBackend::forward(Exchange& x, Pass& p, int m, const std::string& action) {
  const auto& l = *x.layout;
  auto& saved = saved_[m];
  // Each received input is taken when the first op that reads it runs
  // (Note [Inputs on demand] in nn/executor.h); the forward's trace splits
  // into compute segments around the waits.
  auto segment_start = now_us();
  auto receive = [&](int k) {
    const auto t0 = now_us();
    auto t = s_.gather(x, 0, k, m);
    const auto t1 = now_us();
    if (p.trace && t1 - t0 >= kShortestTracedWaitUs) {
      if (t0 > segment_start) p.trace->add(action, "forward", kComputeLane, segment_start, t0);
      p.trace->add_wait("wait " + action, t0, t1);
      segment_start = t1;
    }
    if (s_.crossings_[k].differentiable && torch::GradMode::is_enabled()) t.requires_grad_(true);
    saved.inputs[s_.crossings_[k].op] = t;
    return t;
  };
  if (l.row_end <= l.row_begin) {  // a short evaluation chunk may leave a replica no rows
    for (int k : l.input_ks) receive(k);
    return;
  }
  nn::Batch fields;
  const auto base = p.first_row + m * l.micro_batch;
  if (!s_.fields_.empty()) fields = (*p.source)(base + l.row_begin, base + l.row_end, s_.fields_);
  saved.outputs =
      s_.executor_->forward_on_demand([&](graph::OpId producer) { return receive(l.input_k_of.at(producer)); }, fields);
  for (const auto& piece : l.out) s_.send(x, piece, saved.outputs.at(s_.crossings_[piece.k].op), m, 0);
  if (s_.has_loss_) {
    torch::NoGradGuard no_grad;
    p.result.loss_sum += saved.outputs.at(s_.graph_.loss()).item<double>();
    auto value = [&](graph::OpId id) { return saved.outputs.count(id) ? saved.outputs.at(id) : saved.inputs.at(id); };
    if (s_.classifies_)
      p.result.correct += value(s_.logits_).argmax(1).eq(value(s_.labels_)).sum().item<double>();
  }
  if (!torch::GradMode::is_enabled()) saved_.erase(m);  // evaluation keeps nothing
  if (p.trace) p.trace->add(action, "forward", kComputeLane, segment_start, now_us());
}

void StageExecutor::TensorBackend::backward(Exchange& x, Pass& p, int m, bool last, const std::string& action) {
  const auto& l = *x.layout;
  auto& saved = saved_.at(m);
  const auto t0 = now_us();
  std::vector<torch::Tensor> roots, grads;
  if (s_.has_loss_) {
    auto loss = saved.outputs.at(s_.graph_.loss());
    roots.push_back(loss);
    grads.push_back(torch::full_like(loss, 1.0 / p.divisor));
  }
  std::map<graph::OpId, torch::Tensor> out_grads;
  for (int k : l.output_ks) {
    if (!s_.crossings_[k].differentiable) continue;
    auto gk = s_.gather(x, 1, k, m);
    auto& acc = out_grads[s_.crossings_[k].op];
    acc = acc.defined() ? acc + gk : gk;
  }
  for (auto& [op, grad] : out_grads) {
    const auto& value = saved.outputs.at(op);
    if (value.requires_grad()) roots.push_back(value), grads.push_back(grad);
  }
  const auto t1 = now_us();
  if (p.trace) p.trace->add_wait("wait " + action, t0, t1);
  if (last && p.before_last_backward) p.before_last_backward();
  if (!roots.empty()) torch::autograd::backward(roots, grads);
  for (const auto& piece : l.in) {
    if (!s_.crossings_[piece.k].differentiable) continue;
    const auto& input = saved.inputs.at(s_.crossings_[piece.k].op);
    s_.send(x, piece, input.grad().defined() ? input.grad() : torch::zeros_like(input), m, 1);
  }
  saved_.erase(m);
  if (p.trace) p.trace->add(action, "backward", kComputeLane, t1, now_us());
}

StageExecutor::ClockBackend::ClockBackend(StageExecutor& stage, Emulation emulation)
    : Backend(stage), emulation_(std::move(emulation)) {
  if (emulation_.costs.size() != static_cast<int>(s_.plan_.stages.size()))
    throw PipelineError("emulation: the stage graph has " + std::to_string(emulation_.costs.size()) +
                        " stages but the plan " + std::to_string(s_.plan_.stages.size()));
  if (s_.replicas() > 1) {
    auto devices = s_.plan_.stages[s_.stage_].devices;
    std::sort(devices.begin(), devices.end());
    replicas_ = s_.world_.subgroup(devices, "emulated-stage" + std::to_string(s_.stage_));
  }
}

std::pair<std::int64_t, std::int64_t> StageExecutor::ClockBackend::act(Exchange& x, Pass& p, bool backward, int m,
                                                                       const std::string& action) {
  const auto& cost = emulation_.costs.stages[s_.stage_];
  const int d = backward ? 1 : 0;
  const auto t0 = now_us();
  std::int64_t arrive = 0;
  const auto& in_pieces = *x.dir[d].pieces;
  for (std::size_t i = 0; i < in_pieces.size(); ++i) {
    if (backward && !s_.crossings_[in_pieces[i].k].differentiable) continue;
    arrive = std::max(arrive, static_cast<std::int64_t>(s_.take(x, d, i, m)[0][0].item<double>()));
  }
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(arrive)));
  const auto t1 = now_us();
  if (p.trace) p.trace->add_wait("wait " + action, t0, t1);
  std::this_thread::sleep_for(std::chrono::microseconds(scaled_us(backward ? cost.backward_s : cost.forward_s)));
  const auto t2 = now_us();
  if (p.trace) p.trace->add(action, backward ? "backward" : "forward", kComputeLane, t1, t2);
  // Send on: one channel per stage pair and direction, as in the simulator.
  std::map<std::pair<int, int>, std::int64_t> arrival;  // per edge, this micro-batch
  for (const auto& piece : backward ? x.layout->in : x.layout->out) {
    const auto& c = s_.crossings_[piece.k];
    if (backward && !c.differentiable) continue;
    const auto key = std::make_pair(c.from, c.to);
    if (!arrival.count(key)) {
      double transfer = 0;
      for (const auto& e : emulation_.costs.edges)
        if (e.from == c.from && e.to == c.to) transfer = backward ? e.backward_s : e.forward_s;
      auto& free_at = channel_[{c.from, c.to, d}];
      const auto start = std::max(now_us(), free_at);
      arrival[key] = free_at = start + scaled_us(transfer);
    }
    auto msg = torch::zeros({piece.hi - piece.lo, 1}, torch::kFloat64);
    msg[0][0] = static_cast<double>(arrival[key]);
    s_.post_send(x, piece, msg, m, d);
  }
  return {t1, t2};
}

// After the last backward the stage's modelled gradient-sync tasks run one
// after another, each from its ready point in that backward; the replicas
// wait until the last ends, then meet in a one-element all-reduce; then the
// modelled optimizer step.
void StageExecutor::ClockBackend::finish(Pass& p) {
  const auto [b_start, b_end] = last_backward_;
  std::int64_t chain = 0, finish = b_end;
  for (const auto& task : emulation_.costs.stages[s_.stage_].sync) {
    const auto ready = b_start + static_cast<std::int64_t>(task.ready_fraction * static_cast<double>(b_end - b_start));
    const auto start = std::max(ready, chain);
    chain = start + scaled_us(task.seconds);
    if (p.trace && task.seconds > 0) p.trace->add("sync " + task.name, "sync", kCommLane, start, chain);
    finish = std::max(finish, chain);
  }
  channel_.clear();
  const auto t0 = now_us();
  std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(finish)));
  if (replicas_) {
    auto one = torch::ones({1});
    std::vector<at::Tensor> v{one};
    try {
      replicas_->pg().allreduce(v)->wait(replicas_->timeout());
    } catch (const std::exception& e) {
      const auto lost = replicas_->diagnose();
      throw comm::CommError("the replicas' modelled gradient sync failed" + (lost.empty() ? "" : " (" + lost + ")") +
                                ": " + first_line(e),
                            ErrorKind::kFailure, s_.context());
    }
  }
  if (p.trace) p.trace->add_wait("wait for sync", t0, now_us());
  // Then the modelled optimizer step, as the simulator has it.
  if (const double opt = emulation_.costs.stages[s_.stage_].optimizer_s; opt > 0) {
    const auto t1 = now_us();
    std::this_thread::sleep_for(std::chrono::microseconds(scaled_us(opt)));
    if (p.trace) p.trace->add("optimizer", "optimizer", kComputeLane, t1, now_us());
  }
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
  plan::check_sfb_order(plan, stage.graph());  // checked before start too; a plan made here is checked again
  auto sync = comm::make_hybrid_sync(group, stage.params(), stage.graph(), methods, bucket_bytes, staleness);
  stage.executor().set_observer(sync->observer());
  return sync;
}

}  // namespace trident::runtime
