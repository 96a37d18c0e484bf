// The parts of StageExecutor that its three source files share: what a
// pass exchanges (crossings, pieces, layouts, posted receives) and the
// action backends (see Note [Action backends]). stage_executor.cc interprets
// actions and moves pieces; tensor_backend.cc computes them on the stage's
// modules; clock_backend.cc on the emulated clock (see Note [Emulation]).
// Internal to lib/runtime.
#pragma once

#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "trident/executor/stage_executor.h"
#include "trident/tensor/spec.h"

namespace trident::executor {

class WeightPass;

// One tensor crossing an edge (see Note [Tags]).
struct StageExecutor::Crossing {
  graph::OpId op = -1;
  int from = 0, to = 0;
  graph::TensorSpec declared;   // the plan's, in the dtype the policy computes it in (see Note [Precision policy])
  bool differentiable = false;  // gradients travel back (float, not a dataset field)
  std::string name;             // "'block1.cat' (stage 0 -> stage 2)"
};

// A contiguous row range of one crossing exchanged with one peer rank, in
// the micro-batches m of this stage with m % period == phase (Note
// [Micro-batch ratios in pieces]).
struct StageExecutor::Piece {
  int k = 0, peer = 0;
  std::int64_t lo = 0, hi = 0;  // rows within this stage's micro-batch
  int phase = 0, period = 1;
  int per = 1, sub = 0;  // the message's micro-batch (the finer side's): m * per + sub
  bool in(int m) const { return m % period == phase; }
  int message(int m) const { return m * per + sub; }
};

// A posted p2p operation and its buffer.
struct Posted {
  torch::Tensor buffer;
  c10::intrusive_ptr<c10d::Work> work;
  int peer = 0;
  bool next = false;  // a send of the next mini-batch's forward (Note [Delayed pipelines]): waited a step later
};

// See Note [Tags]; m is the message's number (StageExecutor::message_number).
inline std::uint32_t tag(int k, int m, int micro_batches, int direction) {
  return static_cast<std::uint32_t>((static_cast<std::int64_t>(k) * micro_batches + m) * 2 + direction);
}

inline std::vector<std::int64_t> batch_shape(std::int64_t rows, const graph::TensorSpec& spec) {
  std::vector<std::int64_t> s = {rows};
  s.insert(s.end(), spec.shape.begin(), spec.shape.end());
  return s;
}

// Where this rank's rows and pieces lie (see Note [Rows and pieces]): for the
// plan's micro-batch sizes, or for one size on every stage (a short
// evaluation chunk).
struct StageExecutor::Layout {
  std::int64_t micro_batch = 0, row_begin = 0, row_end = 0;  // this stage's
  int tag_micro_batches = 1;  // M of Note [Tags]: the same on every rank
  std::vector<Piece> in, out;      // this rank's pieces, receive and send
  std::set<int> input_ks, output_ks;  // the crossings k that in / out cover
  std::map<graph::OpId, int> input_k_of;  // the producer op of each received crossing -> its k
};

// The p2p state of one pass: receives posted ahead (see Note [Tags]), sends in flight.
struct StageExecutor::Exchange {
  const Layout* layout = nullptr;
  struct Direction {
    const std::vector<Piece>* pieces = nullptr;
    std::vector<int> order;  // micro-batches in the order the actions consume them
    std::size_t next = 0;    // order[next] is the next to post
    std::vector<std::map<int, Posted>> posted;  // per piece: micro-batch -> receive
  } dir[2];
  std::vector<Posted> sends;
  std::map<std::tuple<int, int, int>, std::int64_t> channel;  // emulated: free time per stage pair and direction
};

// Note [Action backends]
// ~~~~~~~~~~~~~~~~~~~~~~
// Pass() interprets a stage's schedule actions — it
// posts receives ahead (see Note [Tags]), hands each action to the backend,
// posts the next receives, and at the end waits for the sends — and knows
// nothing of what an action computes. The backend does: TensorBackend runs
// the stage's modules on real rows; ClockBackend (see Note [Emulation]) waits
// modelled times and sends modelled arrival times. Both exchange through the
// same pieces and tags, so an emulated run exercises the real protocol.
struct StageExecutor::Pass {
  const FieldSource* source = nullptr;
  double divisor = 1;
  std::int64_t first_row = 0;  // micro-batch m's rows start at first_row + m·micro_batch
  std::function<void()> before_last_backward;
  TraceLog* trace = nullptr;
  StageResult result;
  StageResult next;  // the next mini-batch's forwards' (Note [Delayed pipelines])
  // Now on the trace's compute clock (0 without a trace).
  std::int64_t stamp() const { return trace ? trace->stamp() : 0; }
};

class StageExecutor::Backend {
 public:
  explicit Backend(StageExecutor& stage) : s_(stage) {}
  virtual ~Backend() = default;
  // A receive buffer for `rows` rows of crossing c.
  virtual torch::Tensor buffer(const Crossing& c, std::int64_t rows) const = 0;
  virtual void forward(Exchange& x, Pass& p, int m, const std::string& action) = 0;
  // B of micro-batch m (see Note [Split backward] in schedule.h): the whole
  // backward, or with `split` the gradients of the stage's inputs only, the
  // rest kept for weight(); `last`: it completes the weight gradients.
  struct Part {
    bool last = false, split = false;
  };
  virtual void backward(Exchange& x, Pass& p, int m, Part part, const std::string& action) = 0;
  // W of a split micro-batch m: its weight gradients.
  virtual void weight(Pass& p, int m, bool last, const std::string& action) = 0;
  // After every action and send of the pass.
  virtual void finish(Pass&) {}
  // The weight versions micro-batches in flight use (Note [Weight versions]).
  virtual std::set<std::int64_t> versions_in_flight() const { return {}; }

 protected:
  StageExecutor& s_;
};

class StageExecutor::TensorBackend final : public Backend {
 public:
  using Backend::Backend;
  torch::Tensor buffer(const Crossing& c, std::int64_t rows) const override {
    return torch::empty(batch_shape(rows, c.declared),
                        torch::TensorOptions().dtype(tensor::to_torch(c.declared.dtype)).device(s_.placement_.device()));
  }
  void forward(Exchange& x, Pass& p, int m, const std::string& action) override;
  void backward(Exchange& x, Pass& p, int m, Part part, const std::string& action) override;
  void weight(Pass& p, int m, bool last, const std::string& action) override;
  // Drops what the pass kept; under a delay the next mini-batch's forwards
  // stay, renumbered as the next pass counts them.
  void finish(Pass&) override;
  std::set<std::int64_t> versions_in_flight() const override {
    std::set<std::int64_t> v;
    for (const auto& [m, saved] : saved_) v.insert(saved.version);
    return v;
  }

 private:
  struct Saved {
    nn::TensorMap inputs, outputs;
    nn::Batch fields;  // kept for recomputation only
    std::shared_ptr<const nn::SampledBlocks> blocks;  // See Note [Sampled blocks]: the forward's, for its recomputation
    std::vector<torch::Tensor> roots, grads;  // a split backward's, for its W
    std::shared_ptr<WeightPass> weight_pass;  // See Note [Weight pass]
    std::int64_t version = 0;  // the weight version its forward ran on (Note [Weight versions])
  };
  // Under a delay: points the parameters at micro-batch m's version; a
  // backward checks that its forward ran on it.
  void use_version(int m, Saved& saved, bool forward);
  void recompute(Pass& p, int m, const Layout& l, Saved& saved, const std::string& action);
  // See Note [Slowed processes]: waits (slowdown - 1) x the compute since
  // `start`, less `waited` seconds of waiting for inputs.
  using Clock = std::chrono::steady_clock;
  void slow_down(Clock::time_point start, double waited_s) const;
  std::map<int, Saved> saved_;  // micro-batches between their forward and backward
};

class StageExecutor::ClockBackend final : public Backend {
 public:
  ClockBackend(StageExecutor& stage, Emulation emulation);
  // [rows, 1] float64; element 0 is the modelled arrival in system-clock µs.
  torch::Tensor buffer(const Crossing&, std::int64_t rows) const override {
    return torch::empty({rows, 1}, torch::kFloat64);
  }
  void forward(Exchange& x, Pass& p, int m, const std::string& action) override {
    act(x, p, false, m, action, mine().forward_s);
  }
  void backward(Exchange& x, Pass& p, int m, Part part, const std::string& action) override {
    const auto cost = mine();
    const auto span = act(x, p, true, m, action, part.split ? cost.backward_s - cost.weight_s : cost.backward_s);
    if (part.last) last_backward_ = span;
  }
  void weight(Pass& p, int m, bool last, const std::string& action) override;
  void finish(Pass& p) override;

 private:
  // Waits for the modelled arrivals, waits the modelled compute of
  // `seconds`, sends modelled arrivals on; returns the compute span (µs).
  std::pair<std::int64_t, std::int64_t> act(Exchange& x, Pass& p, bool backward, int m, const std::string& action,
                                            double seconds);
  // This replica's modelled times (its own on a mixed cluster).
  schedule::StageCost::Replica mine() const { return emulation_.costs.stages[s_.stage_].replica(s_.replica_); }
  // A modelled duration, stretched by the dilation, in µs.
  std::int64_t scaled_us(double seconds) const {
    return static_cast<std::int64_t>(seconds * emulation_.dilation * 1e6);
  }
  Emulation emulation_;
  std::optional<comm::Group> replicas_;  // for the closing all-reduce
  std::pair<std::int64_t, std::int64_t> last_backward_{0, 0};
  std::map<std::tuple<int, int, int>, std::int64_t> channel_;  // free time per stage pair and direction
};

}  // namespace trident::executor
