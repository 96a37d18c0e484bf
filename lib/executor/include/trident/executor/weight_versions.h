// WeightVersions: a stage's two weight versions under a pipeline delay
// (PipeDream-2BW; Note [Delayed pipelines] in schedule/delayed.h).
//
// Note [Weight versions]
// ~~~~~~~~~~~~~~~~~~~~~~
// Version v is W(v), the weights after v updates; mini-batch t computes on
// version t − 1 (W(−1) = W(0)). Two buffers per parameter hold the versions
// of even and odd v; the parameter tensors the stage's ops read (and whose
// .grad collects the gradients) stay the same objects, and use(v) points
// their storage at v's buffer (set_data: no copy). An autograd graph keeps
// the storage its forward read, so a micro-batch's backward computes on its
// forward's version whichever the parameters point at meanwhile; before B
// the executor points them back anyway (ops that save the parameter itself
// read it at backward) and checks that the buffer still holds that version.
// The update to version v + 1 (begin_update) overwrites the buffer of
// v − 1 with a copy of v and points the parameters at it; the optimizer, the
// gradient sync and PS pulls then write there. Their writes must not bump
// the parameters' version counters — the forwards of mini-batch v + 1 that
// already ran saved them — so they go through variable_data() aliases
// (unseen()), which share the storage and not the counter. One optimizer
// state per parameter, by name, as always.
//
// At most two versions are resident: begin_update refuses to overwrite a
// version a micro-batch in flight still uses (the executor passes them).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "trident/sync/grad_sync.h"

namespace trident::executor {

class WeightVersions {
 public:
  // `params`: the stage's parameters, holding W(`version`) (0 at the start);
  // the other buffer is a copy of them: W(version − 1) = W(version) until
  // load_older() says otherwise.
  WeightVersions(sync::NamedParams params, std::int64_t version);

  // Points every parameter at version v's buffer (nothing when it already
  // is); throws PipelineError when neither buffer holds v.
  void use(std::int64_t v);
  // The parameters point at a buffer holding v (a backward's check).
  bool holds(std::int64_t v) const { return held_[slot(v)] == v; }
  std::int64_t newest() const { return std::max(held_[0], held_[1]); }
  // Version newest() + 1 begins: the buffer of newest() − 1 takes a copy of
  // newest() and the parameters point at it, ready for the update to write
  // in place (through unseen()). Throws PipelineError, naming the versions,
  // when `in_use` holds newest() − 1 (a third version would be needed).
  void begin_update(const std::set<std::int64_t>& in_use);
  // The older version's tensors by parameter name (for checkpoints).
  std::map<std::string, torch::Tensor> older() const;
  // Loads the older version (newest() − 1) from `weights`, by name.
  void load_older(const std::map<std::string, torch::Tensor>& weights);
  // After the parameters were overwritten in place (a checkpoint loaded):
  // they hold version `v`, the older buffer v − 1 (a copy, until load_older).
  void reset(std::int64_t v);

  // An update that writes through variable_data(): the same storage, not
  // the parameter's version counter (see Note [Weight versions]).
  static sync::GradSync::Update unseen(sync::GradSync::Update update);

 private:
  static int slot(std::int64_t v) { return static_cast<int>(((v % 2) + 2) % 2); }
  sync::NamedParams params_;
  std::array<std::vector<torch::Tensor>, 2> buffers_;
  std::array<std::int64_t, 2> held_{0, 0};
  int pointed_ = 0;  // the buffer the parameters point at
};

}  // namespace trident::executor
