// Bucketed all-reduce with wait-free backpropagation; see grad_sync.h and
// Note [Deterministic communication order].
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <mutex>

#include "trident/comm/grad_sync.h"
#include "trident/cost/comm.h"

namespace trident::comm {
namespace {

using Clock = std::chrono::steady_clock;

class AllReduceSync;

// Shared with the hooks, which outlive nothing: autograd keeps them as long
// as the parameters live, so they reach the sync only through this.
struct HookState {
  std::mutex mu;
  AllReduceSync* owner = nullptr;
};

struct ReadyHook final : torch::autograd::FunctionPostHook {
  ReadyHook(std::shared_ptr<HookState> s, int p) : state(std::move(s)), param(p) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override;
  std::shared_ptr<HookState> state;
  int param;
};

class AllReduceSync final : public GradSync {
 public:
  AllReduceSync(Group group, NamedParams params, std::int64_t bucket_bytes, bool wfbp)
      : group_(std::move(group)), params_(std::move(params)), wfbp_(wfbp), state_(std::make_shared<HookState>()) {
    // Reverse order: backward produces the last parameters' gradients first.
    std::int64_t filled = bucket_bytes;
    bucket_of_.assign(params_.size(), -1);
    for (int i = static_cast<int>(params_.size()) - 1; i >= 0; --i) {
      const auto& t = params_[i].second;
      const std::int64_t bytes = t.numel() * static_cast<std::int64_t>(t.element_size());
      if (buckets_.empty() || filled + bytes > bucket_bytes) buckets_.emplace_back(), filled = 0;
      buckets_.back().params.push_back(i);
      bucket_of_[i] = static_cast<int>(buckets_.size()) - 1;
      filled += bytes;
      const double b = cost::allreduce_bytes(static_cast<double>(bytes), group_.size());
      stats_.sent[params_[i].first] = stats_.received[params_[i].first] = group_.size() > 1 ? b : 0;
    }
    state_->owner = this;
    for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
      auto acc = torch::autograd::impl::grad_accumulator(params_[i].second);
      if (!acc) throw CommError("gradient sync: parameter '" + params_[i].first + "' does not require grad");
      acc->add_post_hook(std::make_unique<ReadyHook>(state_, i));
      accumulators_.push_back(std::move(acc));  // keeps the node, and so the hook, alive
    }
  }

  ~AllReduceSync() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->owner = nullptr;
  }

  void arm() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (auto& b : buckets_) b.ready = 0, b.work.reset(), b.buffer = torch::Tensor();
    next_ = 0;
    armed_ = true;
    start_ = Clock::now();
    stats_.events.clear();
  }

  // Called by a hook, under state_->mu.
  void ready(int param) {
    if (!armed_) return;
    auto& b = buckets_[bucket_of_[param]];
    ++b.ready;
    if (wfbp_) launch_ready();
  }

  void finish() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!armed_) throw CommError("gradient sync: finish() without arm()");
    stats_.backward_end_s = seconds();
    // Unused parameters and (without WFBP) everything start now, in order.
    while (next_ < buckets_.size()) launch(next_++);
    double last = stats_.backward_end_s;
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      auto& b = buckets_[i];
      try {
        b.work->wait(group_.timeout());
      } catch (const std::exception& e) {
        armed_ = false;
        throw CommError("rank " + std::to_string(group_.rank()) + ": all-reduce of gradient bucket " +
                        std::to_string(i) + " (" + params_[b.params.front()].first + " ...) failed: " + e.what());
      }
      const double end = seconds();
      stats_.events.push_back({"allreduce bucket " + std::to_string(i), b.start_s, end});
      last = std::max(last, end);
      std::int64_t offset = 0;
      for (int p : b.params) {
        auto& param = params_[p].second;
        auto slice = b.buffer.narrow(0, offset, param.numel()).view_as(param);
        offset += param.numel();
        if (param.grad().defined()) {
          param.mutable_grad().copy_(slice);
        } else {
          param.mutable_grad() = slice.clone();
        }
      }
    }
    stats_.exposed_s = last - stats_.backward_end_s;
    armed_ = false;
  }

  const SyncStats& stats() const override { return stats_; }
  std::string name() const override { return wfbp_ ? "allreduce" : "allreduce (no WFBP)"; }

 private:
  struct Bucket {
    std::vector<int> params;
    int ready = 0;
    torch::Tensor buffer;
    c10::intrusive_ptr<c10d::Work> work;
    double start_s = 0;
  };

  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void launch_ready() {
    while (next_ < buckets_.size() && buckets_[next_].ready == static_cast<int>(buckets_[next_].params.size()))
      launch(next_++);
  }

  void launch(std::size_t index) {
    auto& b = buckets_[index];
    std::vector<torch::Tensor> parts;
    for (int p : b.params) {
      const auto& param = params_[p].second;
      parts.push_back(param.grad().defined() ? param.grad().reshape(-1) : torch::zeros({param.numel()}, param.options()));
    }
    b.buffer = torch::cat(parts);
    b.start_s = seconds();
    std::vector<at::Tensor> tensors{b.buffer};
    b.work = group_.pg().allreduce(tensors);
  }

  Group group_;
  NamedParams params_;
  bool wfbp_;
  std::shared_ptr<HookState> state_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::size_t next_ = 0;
  bool armed_ = false;
  Clock::time_point start_;
  SyncStats stats_;
};

torch::autograd::variable_list ReadyHook::operator()(const torch::autograd::variable_list& outputs,
                                                     const torch::autograd::variable_list&) {
  std::lock_guard<std::mutex> lock(state->mu);
  if (state->owner) state->owner->ready(param);
  return outputs;
}

}  // namespace

std::unique_ptr<GradSync> make_allreduce_sync(Group group, NamedParams params, std::int64_t bucket_bytes, bool wfbp) {
  if (bucket_bytes < 1) throw CommError("gradient sync: bucket size must be >= 1 byte");
  return std::make_unique<AllReduceSync>(std::move(group), std::move(params), bucket_bytes, wfbp);
}

}  // namespace trident::comm
