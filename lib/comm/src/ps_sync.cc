// Colocated sharded parameter server (grad_sync.h, REFERENCE.md §1).
#include <algorithm>
#include <numeric>

#include "ordered_sync.h"

namespace trident::comm {
namespace {

class PsSync final : public detail::OrderedSync {
 public:
  PsSync(Group group, NamedParams params, std::vector<std::vector<int>> items)
      : OrderedSync(std::move(group), std::move(params), std::move(items), true) {
    owner_ = ps_owners(params_, group_.size());
    buffers_.resize(params_.size());
    works_.resize(params_.size());
    starts_.resize(params_.size());
    const int n = group_.size();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& [name, t] = params_[i];
      const double bytes = static_cast<double>(t.numel() * t.element_size());
      // Push: every other rank sends its gradient to the owner; pull: the
      // owner sends the parameter back to each of them.
      const bool mine = owner_[i] == group_.rank();
      stats_.sent[name] = stats_.received[name] = n > 1 ? (mine ? (n - 1) * bytes : bytes) : 0;
    }
    install_grad_hooks();
  }

  void apply(const Update& update) override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& [name, param] = params_[i];
      if (owner_[i] == group_.rank() && param.grad().defined()) update(name, param, param.grad());
    }
    if (group_.size() == 1) return;
    std::vector<c10::intrusive_ptr<c10d::Work>> pulls(params_.size());
    std::vector<double> starts(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      std::vector<at::Tensor> t{params_[i].second.detach()};
      c10d::BroadcastOptions opts;
      opts.rootRank = owner_[i];
      starts[i] = seconds();
      pulls[i] = group_.pg().broadcast(t, opts);
    }
    for (std::size_t i = 0; i < params_.size(); ++i) {
      try {
        pulls[i]->wait(group_.timeout());
      } catch (const std::exception& e) {
        fail("pull of '" + params_[i].first + "' from its owner, rank " + std::to_string(owner_[i]), e);
      }
      event("pull " + params_[i].first, starts[i]);
    }
  }

  std::string name() const override { return "ps"; }

 private:
  void launch(std::size_t item) override {
    const int p = items_[item].front();
    buffers_[p] = grad_or_zeros(p).clone();
    starts_[p] = seconds();
    std::vector<at::Tensor> t{buffers_[p]};
    c10d::ReduceOptions opts;
    opts.rootRank = owner_[p];
    works_[p] = group_.pg().reduce(t, opts);
  }

  void complete(std::size_t item) override {
    const int p = items_[item].front();
    try {
      works_[p]->wait(group_.timeout());
    } catch (const std::exception& e) {
      fail("push of '" + params_[p].first + "' to its owner, rank " + std::to_string(owner_[p]), e);
    }
    event("push " + params_[p].first, starts_[p]);
    if (owner_[p] == group_.rank()) set_grad(p, buffers_[p]);
    works_[p].reset();
    buffers_[p] = torch::Tensor();
  }

  std::vector<int> owner_;
  std::vector<torch::Tensor> buffers_;
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::vector<double> starts_;
};

}  // namespace

std::vector<int> ps_owners(const NamedParams& params, int ranks) {
  std::vector<int> order(params.size()), owner(params.size(), 0);
  std::iota(order.begin(), order.end(), 0);
  auto bytes = [&](int i) { return params[i].second.numel() * params[i].second.element_size(); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bytes(a) > bytes(b); });
  std::vector<std::int64_t> load(ranks, 0);
  for (int i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[r] += bytes(i);
  }
  return owner;
}

std::unique_ptr<GradSync> make_ps_sync(Group group, NamedParams params) {
  std::vector<std::vector<int>> items;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) items.push_back({i});
  return std::make_unique<PsSync>(std::move(group), std::move(params), std::move(items));
}

}  // namespace trident::comm
