// Colocated sharded parameter server (grad_sync.h, docs/algorithms.md §1).
#include <algorithm>
#include <deque>
#include <numeric>

#include "ordered_sync.h"
#include "trident/cost/comm.h"

namespace trident::comm {
namespace {

class PsSync final : public detail::OrderedSync {
 public:
  PsSync(Group group, NamedParams params, std::vector<std::vector<int>> items, int staleness)
      : OrderedSync(std::move(group), std::move(params), std::move(items), true), staleness_(staleness) {
    owner_ = ps_owners(params_, group_.size());
    buffers_.resize(params_.size());
    works_.resize(params_.size());
    starts_.resize(params_.size());
    const int n = group_.size();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& [name, t] = params_[i];
      const double bytes = static_cast<double>(t.numel() * t.element_size());
      // Push: a Gloo reduce to the owner; pull: the owner's broadcast. What
      // this rank sends and receives in them, exactly (cost::ps_traffic).
      const auto traffic = cost::ps_traffic(bytes, static_cast<int>(t.element_size()), n, owner_[i]);
      stats_.sent[name] = traffic.sent[group_.rank()];
      stats_.received[name] = traffic.received[group_.rank()];
    }
    install_grad_hooks();
  }

  void apply(const Update& update) override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto& [name, param] = params_[i];
      if (owner_[i] == group_.rank() && param.grad().defined()) update(name, param, param.grad());
    }
    if (group_.size() == 1) return;
    // Pull: the owner broadcasts a snapshot, the others receive into a
    // buffer; see Note [Staleness] for when the buffers are applied.
    Pull pull;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      auto buffer = params_[i].second.detach().clone();
      std::vector<at::Tensor> t{buffer};
      c10d::BroadcastOptions opts;
      opts.rootRank = owner_[i];
      pull.starts.push_back(seconds());
      pull.works.push_back(group_.pg().broadcast(t, opts));
      pull.buffers.push_back(buffer);
    }
    pending_.push_back(std::move(pull));
    while (static_cast<int>(pending_.size()) > staleness_) land();
  }

  void flush() override {
    while (!pending_.empty()) land();
  }

  std::string name() const override { return "ps"; }

  Updater updater(const std::string& name) const override {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (params_[i].first == name) return owner_[i] == group_.rank() ? Updater::kThisRank : Updater::kOtherRank;
    return Updater::kEvery;
  }

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
      fail("push of '" + params_[p].first + "' to its owner, " + group_.member(owner_[p]), e);
    }
    event("push " + params_[p].first, starts_[p]);
    if (owner_[p] == group_.rank()) set_grad(p, buffers_[p]);
    works_[p].reset();
    buffers_[p] = torch::Tensor();
  }

  struct Pull {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<torch::Tensor> buffers;
    std::vector<double> starts;
  };

  // Waits for the oldest pull and copies it into the parameters.
  void land() {
    Pull& pull = pending_.front();
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      try {
        pull.works[i]->wait(group_.timeout());
      } catch (const std::exception& e) {
        fail("pull of '" + params_[i].first + "' from its owner, " + group_.member(owner_[i]), e);
      }
      if (owner_[i] != group_.rank()) params_[i].second.copy_(pull.buffers[i]);
      if (staleness_ == 0) event("pull " + params_[i].first, pull.starts[i]);  // same iteration's clock
    }
    pending_.pop_front();
  }

  int staleness_ = 0;
  std::deque<Pull> pending_;
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

std::unique_ptr<GradSync> make_ps_sync(Group group, NamedParams params, int staleness) {
  if (staleness < 0) throw CommError("ps: staleness must be >= 0, got " + std::to_string(staleness));
  std::vector<std::vector<int>> items;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) items.push_back({i});
  return std::make_unique<PsSync>(std::move(group), std::move(params), std::move(items), staleness);
}

}  // namespace trident::comm
