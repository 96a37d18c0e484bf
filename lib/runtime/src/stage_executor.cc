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

void StageExecutor::build() {
  const auto& g = graph_;
  if (world_.size() != plan_.devices)
    throw PipelineError("the plan is for " + std::to_string(plan_.devices) + " devices but " +
                        std::to_string(world_.size()) + " processes were started");
  micro_batches_ = plan_.micro_batches();
  micro_batch_ = plan_.stages.at(0).micro_batch;
  auto rows_of = [&](int s, int j) {
    const auto& d = plan_.stages[s].devices;
    return data::shard_range(micro_batch_, j, static_cast<std::int64_t>(d.size()));
  };
  stage_of_device_.assign(plan_.devices, -1);
  for (const auto& st : plan_.stages)
    for (std::size_t j = 0; j < st.devices.size(); ++j) {
      stage_of_device_[st.devices[j]] = st.id;
      if (st.devices[j] == world_.rank()) stage_ = st.id, replica_ = static_cast<int>(j);
    }
  if (stage_ >= 0) std::tie(row_begin_, row_end_) = rows_of(stage_, replica_);

  for (const auto& e : plan_.edges) {
    for (const auto& t : e.tensors) {
      Crossing c;
      c.op = g.id_of(t.op);
      c.from = e.from, c.to = e.to;
      c.declared = {t.shape, graph::dtype_from_string(t.dtype)};
      c.differentiable = !g.op(c.op).is_input() && c.declared.dtype != graph::DType::kInt64;
      c.name = "'" + t.op + "' (stage " + std::to_string(e.from) + " -> stage " + std::to_string(e.to) + ")";
      const int k = static_cast<int>(crossings_.size());
      crossings_.push_back(c);
      if (stage_ < 0) continue;
      auto overlaps = [&](int other, bool receiving) {
        const auto& devs = plan_.stages[other].devices;
        for (int j = 0; j < static_cast<int>(devs.size()); ++j) {
          const auto [lo, hi] = rows_of(other, j);
          const auto a = std::max(lo, row_begin_), b = std::min(hi, row_end_);
          if (a < b) (receiving ? in_ : out_).push_back({k, devs[j], a, b});
        }
      };
      if (c.to == stage_) overlaps(c.from, true);
      if (c.from == stage_) overlaps(c.to, false);
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
  for (const auto& a : schedule::parse_actions(st.actions)) {
    if (a.kind == schedule::Action::Kind::kBackward) last_backward_ = static_cast<int>(actions_.size());
    actions_.emplace_back(a.kind == schedule::Action::Kind::kBackward, a.micro_batch);
  }
  for (const auto& p : in_) input_ks_.insert(p.k);
  for (const auto& p : out_) output_ks_.insert(p.k);
}

StageResult StageExecutor::run(const FieldSource& source, double divisor,
                               const std::function<void()>& before_last_backward, TraceLog* trace) {
  StageResult result;
  if (stage_ < 0) return result;
  const auto& g = graph_;
  auto& pg = world_.pg();
  const bool emulated = emulation_.has_value();
  // Emulated messages: [rows, 1] float64, element 0 the modelled arrival (Note [Emulation]).
  auto message_shape = [&](std::int64_t rows, const graph::TensorSpec& spec) {
    return emulated ? std::vector<std::int64_t>{rows, 1} : batch_shape(rows, spec);
  };
  auto message_type = [&](const graph::TensorSpec& spec) {
    return emulated ? torch::kFloat64 : nn::to_torch(spec.dtype);
  };
  const int M = micro_batches_;
  const std::string here = "rank " + std::to_string(world_.rank()) + " (stage " + std::to_string(stage_) + ")";

  // Post every receive of the iteration (Note [Tags]): activations from the
  // in-pieces, gradients (of differentiable tensors only) from the out-pieces.
  auto post_receives = [&](const std::vector<Piece>& pieces, int direction) {
    std::vector<std::vector<Posted>> posted(pieces.size());
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto& c = crossings_[pieces[i].k];
      if (direction == 1 && !c.differentiable) continue;
      for (int m = 0; m < M; ++m) {
        Posted p{torch::empty(message_shape(pieces[i].hi - pieces[i].lo, c.declared), message_type(c.declared)), {}};
        std::vector<at::Tensor> v{p.buffer};
        p.work = pg.recv(v, pieces[i].peer, static_cast<int>(tag(pieces[i].k, m, M, direction)));
        posted[i].push_back(std::move(p));
      }
    }
    return posted;
  };
  auto fwd = post_receives(in_, 0), bwd = post_receives(out_, 1);
  std::vector<Posted> sends;
  auto post_send = [&](const Piece& piece, const torch::Tensor& message, int m, int direction) {
    std::vector<at::Tensor> v{message};
    sends.push_back({message, pg.send(v, piece.peer, static_cast<int>(tag(piece.k, m, M, direction)))});
  };
  auto note_wait = [&](std::int64_t t0, std::int64_t t1, const std::string& action) {
    if (trace && t1 - t0 > 50) trace->add("wait " + action, "wait", kComputeLane, t0, t1);
  };
  auto wait = [&](Posted& p, int peer, const std::string& what, const std::string& action) {
    try {
      p.work->wait(world_.timeout());
    } catch (const std::exception& e) {
      const auto lost = world_.diagnose();
      throw comm::CommError(here + ": " + action + " waited for " + what + " from rank " + std::to_string(peer) +
                            " (stage " + std::to_string(stage_of_device_[peer]) + ")" +
                            (lost.empty() ? "" : " (" + lost + ")") + ": " + comm::one_line(e));
    }
  };
  // Gathers this rank's rows of crossing-group `pieces` (same k) for micro-batch m.
  auto gather = [&](const std::vector<Piece>& pieces, std::vector<std::vector<Posted>>& posted, int k, int m,
                    const std::string& action, const std::string& what) {
    std::vector<std::pair<std::int64_t, torch::Tensor>> parts;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i].k != k) continue;
      wait(posted[i][m], pieces[i].peer, what + " " + crossings_[k].name, action);
      parts.emplace_back(pieces[i].lo, posted[i][m].buffer);
    }
    std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<torch::Tensor> ts;
    for (auto& [lo, t] : parts) ts.push_back(t);
    return ts.size() == 1 ? ts[0] : torch::cat(ts);
  };
  auto send = [&](const Piece& piece, const torch::Tensor& value, int m, int direction) {
    const auto& c = crossings_[piece.k];
    auto slice = value.narrow(0, piece.lo - row_begin_, piece.hi - piece.lo).detach().contiguous();
    if (!nn::matches(slice, c.declared) || slice.size(0) != piece.hi - piece.lo)
      throw PipelineError(here + ": micro-batch " + std::to_string(m) + ": edge " + c.name + " declares [" +
                          std::to_string(piece.hi - piece.lo) + (c.declared.shape.empty() ? "" : ",") +
                          graph::to_string(c.declared).substr(1) + " but the stage produced " +
                          nn::describe(slice) + (direction ? " as its gradient" : ""));
    post_send(piece, slice, m, direction);
  };

  // Emulated transfers (Note [Emulation]): one channel per stage pair and direction.
  std::map<std::tuple<int, int, int>, std::int64_t> channel;
  auto emulated_send = [&](const std::vector<Piece>& pieces, int m, int direction) {
    std::map<std::pair<int, int>, std::int64_t> arrival;  // per edge, this micro-batch
    for (const auto& piece : pieces) {
      const auto& c = crossings_[piece.k];
      if (direction == 1 && !c.differentiable) continue;
      const auto key = std::make_pair(c.from, c.to);
      if (!arrival.count(key)) {
        double seconds = 0;
        for (const auto& e : emulation_->costs.edges)
          if (e.from == c.from && e.to == c.to) seconds = direction ? e.backward_s : e.forward_s;
        auto& free_at = channel[{c.from, c.to, direction}];
        const auto start = std::max(now_us(), free_at);
        arrival[key] = free_at = start + static_cast<std::int64_t>(seconds * emulation_->dilation * 1e6);
      }
      auto msg = torch::zeros({piece.hi - piece.lo, 1}, torch::kFloat64);
      msg[0][0] = static_cast<double>(arrival[key]);
      post_send(piece, msg, m, direction);
    }
  };
  auto emulated_wait = [&](const std::vector<Piece>& pieces, std::vector<std::vector<Posted>>& posted, int m,
                           bool backward, const std::string& action) {
    std::int64_t arrive = 0;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      if (backward && !crossings_[pieces[i].k].differentiable) continue;
      wait(posted[i][m], pieces[i].peer, (backward ? "gradients of " : "activations of ") + crossings_[pieces[i].k].name,
           action);
      arrive = std::max(arrive, static_cast<std::int64_t>(posted[i][m].buffer[0][0].item<double>()));
    }
    std::this_thread::sleep_until(std::chrono::system_clock::time_point(std::chrono::microseconds(arrive)));
  };
  auto work_for = [&](double seconds) {
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<std::int64_t>(seconds * emulation_->dilation * 1e6)));
  };
  std::int64_t last_b_start = 0, last_b_end = 0;

  struct Saved {
    nn::TensorMap inputs, outputs;
  };
  std::vector<Saved> saved(M);

  for (int i = 0; i < static_cast<int>(actions_.size()); ++i) {
    const auto [backward, m] = actions_[i];
    const std::string action = std::string(backward ? "B" : "F") + std::to_string(m);
    if (emulated) {
      const auto& cost = emulation_->costs.stages[stage_];
      const auto t0 = now_us();
      emulated_wait(backward ? out_ : in_, backward ? bwd : fwd, m, backward, action);
      const auto t1 = now_us();
      note_wait(t0, t1, action);
      work_for(backward ? cost.backward_s : cost.forward_s);
      const auto t2 = now_us();
      if (trace) trace->add(action, backward ? "backward" : "forward", kComputeLane, t1, t2);
      if (backward && i == last_backward_) last_b_start = t1, last_b_end = t2;
      emulated_send(backward ? in_ : out_, m, backward ? 1 : 0);
      continue;
    }
    auto& s = saved[m];
    if (!backward) {
      const auto t0 = now_us();
      for (int k : input_ks_) {
        auto t = gather(in_, fwd, k, m, action, "activations of");
        if (crossings_[k].differentiable) t.requires_grad_(true);
        s.inputs[crossings_[k].op] = t;
      }
      const auto t1 = now_us();
      note_wait(t0, t1, action);
      nn::Batch fields;
      if (!fields_.empty()) fields = source(m * micro_batch_ + row_begin_, m * micro_batch_ + row_end_, fields_);
      s.outputs = executor_->forward(s.inputs, fields);
      for (const auto& p : out_) send(p, s.outputs.at(crossings_[p.k].op), m, 0);
      if (has_loss_) {
        torch::NoGradGuard no_grad;
        result.loss_sum += s.outputs.at(g.loss()).item<double>();
        auto value = [&](graph::OpId id) { return s.outputs.count(id) ? s.outputs.at(id) : s.inputs.at(id); };
        result.correct += value(logits_).argmax(1).eq(value(labels_)).sum().item<double>();
      }
      if (trace) trace->add(action, "forward", kComputeLane, t1, now_us());
    } else {
      if (i == last_backward_ && before_last_backward) before_last_backward();
      const auto t0 = now_us();
      std::vector<torch::Tensor> roots, grads;
      if (has_loss_) {
        auto loss = s.outputs.at(g.loss());
        roots.push_back(loss);
        grads.push_back(torch::full_like(loss, 1.0 / divisor));
      }
      std::map<graph::OpId, torch::Tensor> out_grads;
      for (int k : output_ks_) {
        if (!crossings_[k].differentiable) continue;
        auto gk = gather(out_, bwd, k, m, action, "gradients of");
        auto& acc = out_grads[crossings_[k].op];
        acc = acc.defined() ? acc + gk : gk;
      }
      for (auto& [op, grad] : out_grads) {
        const auto& value = s.outputs.at(op);
        if (value.requires_grad()) roots.push_back(value), grads.push_back(grad);
      }
      const auto t1 = now_us();
      note_wait(t0, t1, action);
      if (!roots.empty()) torch::autograd::backward(roots, grads);
      for (const auto& p : in_) {
        if (!crossings_[p.k].differentiable) continue;
        const auto& input = s.inputs.at(crossings_[p.k].op);
        send(p, input.grad().defined() ? input.grad() : torch::zeros_like(input), m, 1);
      }
      s = Saved{};
      if (trace) trace->add(action, "backward", kComputeLane, t1, now_us());
    }
  }
  for (auto& p : sends) {
    try {
      p.work->wait(world_.timeout());
    } catch (const std::exception& e) {
      const auto lost = world_.diagnose();
      throw comm::CommError(here + ": a send of the last iteration did not complete" +
                            (lost.empty() ? "" : " (" + lost + ")") + ": " + comm::one_line(e));
    }
  }
  if (emulated) emulated_sync(last_b_start, last_b_end, trace);
  return result;
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

void StageExecutor::share_weights() {
  torch::NoGradGuard no_grad;
  if (!module_) return;
  const auto& g = graph_;
  for (const auto& st : plan_.stages) {
    std::vector<graph::OpId> ops;
    for (const auto& name : st.ops) ops.push_back(g.id_of(name));
    for (auto& [name, p] : module_->parameters_of(ops)) {
      std::vector<at::Tensor> v{p.detach()};
      c10d::BroadcastOptions opts;
      opts.rootRank = st.devices.front();
      world_.pg().broadcast(v, opts)->wait(world_.timeout());
    }
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
