// Bucketed all-reduce with wait-free backpropagation (grad_sync.h).
#include "ordered_sync.h"
#include "trident/cost/network.h"

namespace trident::sync {
namespace {

class AllReduceSync final : public detail::OrderedSync {
 public:
  AllReduceSync(comm::Group group, NamedParams params, std::vector<std::vector<int>> buckets, bool wfbp)
      : OrderedSync(std::move(group), std::move(params), std::move(buckets), wfbp), wfbp_(wfbp) {
    buffers_.resize(items_.size());
    works_.resize(items_.size());
    starts_.resize(items_.size());
    for (const auto& [name, t] : params_) {
      const double bytes = static_cast<double>(t.numel() * t.element_size());
      stats_.sent[name] = stats_.received[name] = group_.size() > 1 ? cost::allreduce_bytes(bytes, group_.size()) : 0;
    }
    install_grad_hooks();
  }

  std::string name() const override { return wfbp_ ? "allreduce" : "allreduce (no WFBP)"; }

 private:
  // A bucket's flat buffer is kept across iterations: a fresh large one is
  // a fresh mapping whose pages all fault on first touch (see Note [PS buffers]
  // in ps_pieces.h).
  void launch(std::size_t i) override {
    if (!buffers_[i].defined()) {
      std::int64_t total = 0;
      for (int p : items_[i]) total += params_[p].second.numel();
      buffers_[i] = torch::empty({total}, params_[items_[i].front()].second.options().requires_grad(false));
    }
    std::int64_t offset = 0;
    for (int p : items_[i]) {
      const auto n = params_[p].second.numel();
      buffers_[i].narrow(0, offset, n).copy_(grad_or_zeros(p).reshape(-1));
      offset += n;
    }
    starts_[i] = seconds();
    std::vector<at::Tensor> tensors{buffers_[i]};
    works_[i] = group_.pg().allreduce(tensors);
  }

  void complete(std::size_t i) override {
    try {
      works_[i]->wait(group_.timeout());
    } catch (const std::exception& e) {
      fail("all-reduce of gradient bucket " + std::to_string(i) + " (" + params_[items_[i].front()].first + " ...)", e);
    }
    event("allreduce bucket " + std::to_string(i), starts_[i]);
    std::int64_t offset = 0;
    for (int p : items_[i]) {
      const auto n = params_[p].second.numel();
      set_grad(p, buffers_[i].narrow(0, offset, n));
      offset += n;
    }
    works_[i].reset();
  }

  bool wfbp_;
  std::vector<torch::Tensor> buffers_;  // by bucket, reused
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::vector<double> starts_;
};

}  // namespace

std::unique_ptr<GradSync> make_allreduce_sync(comm::Group group, NamedParams params, std::int64_t bucket_bytes, bool wfbp) {
  auto buckets = detail::reverse_buckets(params, bucket_bytes);
  return std::make_unique<AllReduceSync>(std::move(group), std::move(params), std::move(buckets), wfbp);
}

}  // namespace trident::sync
