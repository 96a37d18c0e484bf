// StageExecutor::TensorBackend: a stage's forward and backward on its
// modules and real rows (see Note [Action backends], stage_parts.h).
#include "stage_parts.h"

#include <chrono>
#include <optional>
#include <thread>

#include "weight_pass.h"

#include "trident/nn/random.h"

namespace trident::executor {

void StageExecutor::TensorBackend::forward(Exchange& x, Pass& p, int m, const std::string& action) {
  const auto& l = *x.layout;
  auto& saved = saved_[m];
  const bool training = torch::GradMode::is_enabled();
  // See Note [Recomputation]: a recomputing stage records no autograd graph now
  // and keeps only what it received and read.
  const bool recompute = training && s_.recompute_;
  std::optional<torch::NoGradGuard> no_graph;
  if (recompute) no_graph.emplace();
  // Each received input is taken when the first op that reads it runs
  // (see Note [Inputs on demand] in nn/graph_executor.h); the forward's trace splits
  // into compute segments around the waits. On the host a short wait stays
  // inside the forward; on a device each receive is marked, and a short wait
  // is dropped when the marks are timed (see Note [GPU spans] in trace.h).
  auto segment_start = p.stamp();
  const auto started = Clock::now();
  double waited_s = 0;
  auto receive = [&](int k) {
    const auto t0 = p.stamp();
    const auto w0 = Clock::now();
    auto t = s_.gather(x, 0, k, m);
    waited_s += std::chrono::duration<double>(Clock::now() - w0).count();
    const auto t1 = p.stamp();
    if (p.trace && (p.trace->device || t1 - t0 >= kShortestTracedWaitUs)) {
      p.trace->add_stamped(action, "forward", segment_start, t0);
      p.trace->add_stamped("wait " + action, "wait", t0, t1);
      segment_start = t1;
    }
    if (s_.crossings_[k].differentiable && torch::GradMode::is_enabled()) t.requires_grad_(true);
    saved.inputs[s_.crossings_[k].op] = t;
    return t;
  };
  if (l.row_end <= l.row_begin) {  // a short evaluation chunk may leave a replica no rows
    if (s_.blocks_) s_.blocks_(torch::empty({0}, torch::kInt64), training);  // a collective: join it
    for (int k : l.input_ks) receive(k);
    return;
  }
  nn::Batch fields;
  // See Note [Delayed pipelines]: micro-batch count + j is the next mini-batch's j.
  const bool next = training && s_.delayed() && m >= s_.micro_batches_;
  if (training) use_version(m, saved, true);
  std::optional<nn::RandomScope> random;  // See Note [Random ops]: training draws by (seed, step, micro-batch)
  if (training) random.emplace(nn::RandomKey{s_.random_seed_, s_.random_step_ + next, m - next * s_.micro_batches_});
  const auto base = p.first_row + m * l.micro_batch;
  if (!s_.fields_.empty()) fields = (*p.source)(base + l.row_begin, base + l.row_end, s_.fields_);
  const auto nodes = s_.node_scope(&fields);  // See Note [Node partitions]
  const auto chunks = s_.chunk_scope(base + l.row_begin, l.row_end - l.row_begin, training);  // Note [Node chunks]
  std::optional<nn::BlockScope> blocks;  // See Note [Sampled blocks]
  if (s_.blocks_) saved.blocks = s_.blocks_(fields.at("node").cpu(), training), blocks.emplace(saved.blocks);
  if (next && s_.next_forwards_) s_.next_forwards_(true);  // observers file its captures under the next step
  saved.outputs =
      s_.executor_->forward_on_demand([&](graph::OpId producer) { return receive(l.input_k_of.at(producer)); }, fields);
  if (next && s_.next_forwards_) s_.next_forwards_(false);
  slow_down(started, waited_s);
  for (const auto& piece : l.out)
    if (piece.in(m)) s_.send(x, piece, saved.outputs.at(s_.crossings_[piece.k].op), m, 0);
  if (s_.has_loss_) {
    torch::NoGradGuard no_grad;
    auto& result = next ? p.next : p.result;
    result.loss_sum += saved.outputs.at(s_.graph_.loss()).item<double>();
    auto value = [&](graph::OpId id) { return saved.outputs.count(id) ? saved.outputs.at(id) : saved.inputs.at(id); };
    if (s_.classifies_)
      result.correct += nn::correct_predictions(s_.loss_kind_, value(s_.logits_), value(s_.labels_),
                                                  s_.mask_ >= 0 ? value(s_.mask_) : torch::Tensor(), s_.ignore_index_);
  }
  if (!training) saved_.erase(m);  // evaluation keeps nothing
  if (recompute) saved.outputs.clear(), saved.fields = std::move(fields);
  if (p.trace) p.trace->add_stamped(action, "forward", segment_start, p.stamp());
}

void StageExecutor::TensorBackend::backward(Exchange& x, Pass& p, int m, Part part, const std::string& action) {
  const auto& l = *x.layout;
  auto& saved = saved_.at(m);
  const auto nodes = s_.node_scope();
  use_version(m, saved, false);
  if (s_.recompute_) recompute(p, m, l, saved, action);
  const auto t0 = p.stamp();
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
    if (value.requires_grad()) roots.push_back(value), grads.push_back(grad.to(value.scalar_type()));
  }
  const auto t1 = p.stamp();
  const auto started = Clock::now();
  if (p.trace) p.trace->add_stamped("wait " + action, "wait", t0, t1);
  if (part.last && p.before_last_backward) p.before_last_backward();
  std::map<graph::OpId, torch::Tensor> input_grads;  // a split B's; else the inputs' .grad
  if (part.split) {
    std::vector<graph::OpId> ops;
    std::vector<torch::Tensor> targets;
    for (const auto& [op, t] : saved.inputs)
      if (t.requires_grad()) ops.push_back(op), targets.push_back(t);
    std::vector<torch::Tensor> weights;
    for (const auto& [name, w] : s_.params_)
      if (w.requires_grad()) weights.push_back(w);
    saved.weight_pass = std::make_shared<WeightPass>(roots, targets, weights);
    if (!roots.empty() && !targets.empty()) {
      const auto g = torch::autograd::grad(roots, targets, grads, /*retain_graph=*/true, /*create_graph=*/false,
                                           /*allow_unused=*/true);
      for (std::size_t i = 0; i < ops.size(); ++i) input_grads[ops[i]] = g[i];
    }
    saved.weight_pass->unhook();
    saved.roots = std::move(roots), saved.grads = std::move(grads);
  } else if (!roots.empty()) {
    torch::autograd::backward(roots, grads);
  }
  slow_down(started, 0);
  for (const auto& piece : l.in) {
    if (!s_.crossings_[piece.k].differentiable || !piece.in(m)) continue;
    const auto op = s_.crossings_[piece.k].op;
    const auto& input = saved.inputs.at(op);
    const auto grad = part.split ? input_grads[op] : input.grad();
    s_.send(x, piece, grad.defined() ? grad : torch::zeros_like(input), m, 1);
  }
  if (!part.split) saved_.erase(m);
  if (p.trace) p.trace->add_stamped(action, "backward", t1, p.stamp());
}

// See Note [Two-pass split backward].
void StageExecutor::TensorBackend::weight(Pass& p, int m, bool last, const std::string& action) {
  auto& saved = saved_.at(m);
  const auto nodes = s_.node_scope();
  const auto t0 = p.stamp();
  const auto started = Clock::now();
  if (last && p.before_last_backward) p.before_last_backward();
  saved.weight_pass->run(saved.roots, saved.grads);
  slow_down(started, 0);
  saved_.erase(m);
  if (p.trace) p.trace->add_stamped(action, "weight", t0, p.stamp());
}

// See Note [Weight versions].
void StageExecutor::TensorBackend::use_version(int m, Saved& saved, bool forward) {
  auto* versions = s_.versions_.get();
  if (!versions) return;
  const auto v = s_.version_of(m);
  if (forward) {
    saved.version = v;
    versions->use(v);
    s_.most_versions_ = std::max(s_.most_versions_, static_cast<int>(versions_in_flight().size()));
    return;
  }
  if (saved.version != v || !versions->holds(v))
    throw PipelineError("the backward of micro-batch " + std::to_string(m) + " would run on weight version " +
                        std::to_string(v) + (versions->holds(v) ? "" : " (no longer resident)") +
                        " but its forward ran on version " + std::to_string(saved.version));
  versions->use(v);
}

void StageExecutor::TensorBackend::finish(Pass&) {
  if (!s_.delayed()) return saved_.clear();
  // See Note [Delayed pipelines]: the next mini-batch's forwards stay, numbered as the next step counts them.
  std::map<int, Saved> kept;
  for (auto& [m, saved] : saved_)
    if (m >= s_.micro_batches_) kept.emplace(m - s_.micro_batches_, std::move(saved));
  saved_ = std::move(kept);
}

void StageExecutor::TensorBackend::recompute(Pass& p, int m, const Layout& l, Saved& saved,
                                             const std::string& action) {
  const auto t0 = p.stamp();
  for (auto& [producer, t] : saved.inputs)
    if (s_.crossings_[l.input_k_of.at(producer)].differentiable) t.requires_grad_(true);
  nn::RandomScope random(nn::RandomKey{s_.random_seed_, s_.random_step_, m});
  const auto base = p.first_row + m * l.micro_batch;
  const auto chunks = s_.chunk_scope(base + l.row_begin, l.row_end - l.row_begin, true);  // Note [Node chunks]
  nn::BlockScope blocks(saved.blocks);  // See Note [Sampled blocks]: the first forward's
  saved.outputs = s_.executor_->forward(saved.inputs, saved.fields);
  if (p.trace) p.trace->add_stamped("recompute " + action, "forward", t0, p.stamp());
}

void StageExecutor::TensorBackend::slow_down(Clock::time_point start, double waited_s) const {
  if (s_.slowdown_ <= 1) return;
  const double compute = std::chrono::duration<double>(Clock::now() - start).count() - waited_s;
  if (compute > 0) std::this_thread::sleep_for(std::chrono::duration<double>((s_.slowdown_ - 1) * compute));
}

}  // namespace trident::executor
