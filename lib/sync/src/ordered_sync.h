// Internal: the machinery every strategy shares — readiness hooks and
// launching work items (buckets, parameters) strictly in item order (Note
// [Deterministic communication order]), then completing them in finish().
#pragma once

#include <chrono>
#include <mutex>

#include "trident/sync/grad_sync.h"

namespace trident::sync::detail {

// What a Gloo collective is handed for `t`: Gloo in LibTorch 1.13 refuses
// bf16 in every collective, so a bf16 tensor travels as a kHalf view of the
// same bytes (exact: nothing reads them as half; see Note [Push dtype]).
inline torch::Tensor gloo_view(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? t.view(torch::kHalf) : t;
}

class OrderedSync;

struct HookState {
  std::mutex mu;
  OrderedSync* owner = nullptr;
  bool next = false;  // SFB: captures belong to the next iteration (GradSync::next_forwards)
};

class OrderedSync : public GradSync {
 public:
  ~OrderedSync() override;
  void arm() override;
  void finish() override;
  void apply(const Update& update) override;
  const SyncStats& stats() const override { return stats_; }
  // Member 0 counts every parameter (see Note [Global gradient norm]).
  double grad_square_sum() override;
  // A parameter's gradient (or, for SFB, its factors) is ready; called by
  // hooks under state_->mu.
  void mark_ready(int param);

 protected:
  // `items[i]` lists parameter indices; item i starts once all of them are
  // ready and items 0..i-1 have started (or all at finish() without WFBP).
  OrderedSync(comm::Group group, NamedParams params, std::vector<std::vector<int>> items, bool wfbp);
  // AccumulateGrad post-hooks mark a parameter ready (all but SFB use them).
  void install_grad_hooks();
  virtual void launch(std::size_t item) = 0;
  virtual void complete(std::size_t item) = 0;  // wait; leave the summed gradient in place
  double seconds() const;
  // A parameter's gradient, or zeros when backward did not reach it.
  torch::Tensor grad_or_zeros(int param) const;
  void set_grad(int param, const torch::Tensor& value);
  void event(const std::string& name, double start) { stats_.events.push_back({name, start, seconds()}); }
  // A span that began at `start` (any iteration's), timed from this one's arm().
  using TimePoint = std::chrono::steady_clock::time_point;
  void event(const std::string& name, TimePoint start) {
    stats_.events.push_back({name, std::chrono::duration<double>(start - start_).count(), seconds()});
  }
  [[noreturn]] void fail(const std::string& what, const std::exception& e) const;

  comm::Group group_;
  NamedParams params_;
  std::vector<std::vector<int>> items_;
  std::vector<int> item_of_;
  std::shared_ptr<HookState> state_;
  SyncStats stats_;
  bool armed_ = false;
  TimePoint start_;

 private:
  bool wfbp_;
  std::vector<int> ready_;
  std::size_t next_ = 0;
  // Whatever grad_accumulator returns (intrusive_ptr in LibTorch 2.x).
  using Accumulator = decltype(torch::autograd::impl::grad_accumulator(std::declval<torch::Tensor>()));
  std::vector<Accumulator> accumulators_;
};

// Parameter indices packed in reverse order (backward produces the last
// parameters' gradients first) into buckets of at most `bucket_bytes`; a
// parameter larger than that gets its own. Throws CommError below 1 byte.
std::vector<std::vector<int>> reverse_buckets(const NamedParams& params, std::int64_t bucket_bytes);

}  // namespace trident::sync::detail
