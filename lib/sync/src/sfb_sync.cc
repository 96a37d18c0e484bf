// Sufficient-factor broadcasting (grad_sync.h, docs/algorithms.md §1).
#include <algorithm>

#include "ordered_sync.h"
#include "trident/cost/network.h"

namespace trident::sync {
namespace {

class SfbSync final : public detail::OrderedSync {
 public:
  SfbSync(comm::Group group, NamedParams params, std::vector<std::vector<int>> items, const graph::OpGraph& g,
          std::vector<std::int64_t> shares)
      : OrderedSync(std::move(group), std::move(params), std::move(items), true), shares_(std::move(shares)) {
    if (!shares_.empty() && static_cast<int>(shares_.size()) != group_.size())
      throw comm::CommError("sfb: " + std::to_string(shares_.size()) + " shares for a group of " + std::to_string(group_.size()));
    factors_.resize(params_.size());
    for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
      const auto& name = params_[i].first;
      const graph::Op* found = nullptr;
      const graph::ParamSpec* spec = nullptr;
      for (const auto& op : g.ops())
        for (const auto& p : op.params)
          if (p.name == name) found = &op, spec = &p;
      if (!found || !cost::sfb_shape(*found, *spec))
        throw comm::CommError("sfb: '" + name + "' is not the weight of a Linear layer; sync it with allreduce or ps");
      const auto shape = *cost::sfb_shape(*found, *spec);
      factors_[i].m = shape.m, factors_[i].n = shape.n;
      by_op_[g.id_of(found->name)] = i;
    }
  }

  OpObserver observer() override {
    auto state = state_;
    return [this, state](graph::OpId id, const std::vector<torch::Tensor>& inputs, const torch::Tensor& output) {
      auto it = by_op_.find(id);
      if (it == by_op_.end() || !output.requires_grad()) return;
      const int p = it->second;
      std::lock_guard<std::mutex> lock(state->mu);
      auto& f = factors_[p];
      // In the dtype the product ran in (the output's): bf16 under the bf16 policy.
      (state->next ? f.a_next : f.a).push_back(inputs[0].detach().reshape({-1, f.m}).to(output.scalar_type()));
      output.register_hook([state, p](torch::Tensor grad) {
        std::lock_guard<std::mutex> lock(state->mu);
        if (!state->owner) return;
        auto* self = static_cast<SfbSync*>(state->owner);
        auto& f = self->factors_[p];
        f.d.push_back(grad.detach().reshape({-1, f.n}).to(f.a.front().scalar_type()));
        // The last micro-batch's output gradient completes this layer's factors.
        if (f.d.size() == f.a.size()) self->mark_ready(p);
      });
    };
  }

  std::string name() const override { return "sfb"; }
  void next_forwards(bool next) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->next = next;
  }

 private:
  struct Factors {
    std::int64_t m = 0, n = 0;
    std::vector<torch::Tensor> a, d;  // per micro-batch: [rows, M], [rows, N]
    std::vector<torch::Tensor> a_next;  // the next iteration's inputs, captured early (GradSync::next_forwards)
    torch::Tensor a_all, d_all;       // this rank's, concatenated
    std::vector<std::vector<at::Tensor>> a_out, d_out;
    c10::intrusive_ptr<c10d::Work> wa, wd;
    double start = 0;
  };

  void launch(std::size_t item) override {
    const int p = items_[item].front();
    auto& f = factors_[p];
    if (f.a.empty() || f.a.size() != f.d.size())
      throw comm::CommError("sfb: layer of '" + params_[p].first + "' captured " + std::to_string(f.a.size()) +
                            " inputs and " + std::to_string(f.d.size()) +
                            " output gradients; attach observer() to the executor and run backward");
    f.a_all = padded(torch::cat(f.a));
    f.d_all = padded(torch::cat(f.d));
    const auto rows = f.a_all.size(0);
    const int n = group_.size();
    const double bytes = static_cast<double>(cost::sfb_bytes(rows, f.m, f.n, f.a_all.element_size(), n));
    stats_.sent[params_[p].first] = stats_.received[params_[p].first] = bytes;
    f.a_out.assign(1, std::vector<at::Tensor>(n));
    f.d_out.assign(1, std::vector<at::Tensor>(n));
    for (int r = 0; r < n; ++r) f.a_out[0][r] = torch::empty_like(f.a_all), f.d_out[0][r] = torch::empty_like(f.d_all);
    f.start = seconds();
    std::vector<at::Tensor> a_in{detail::gloo_view(f.a_all)}, d_in{detail::gloo_view(f.d_all)};
    std::vector<std::vector<at::Tensor>> a_out(1), d_out(1);
    for (int r = 0; r < n; ++r) a_out[0].push_back(detail::gloo_view(f.a_out[0][r])), d_out[0].push_back(detail::gloo_view(f.d_out[0][r]));
    f.wa = group_.pg().allgather(a_out, a_in);
    f.wd = group_.pg().allgather(d_out, d_in);
  }

  // See Note [Replica shares] (plan/plan.h): members run unequal
  // rows, and an all-gather moves equal sizes, so every member's factors
  // are padded to the largest share's rows with zero rows, which add
  // nothing to Σ_k δ_k a_kᵀ. A member's rows are its share times a count
  // every member has (micro-batches × positions), so all pad alike.
  torch::Tensor padded(const torch::Tensor& rows) const {
    if (shares_.empty()) return rows;
    const auto mine = shares_[static_cast<std::size_t>(group_.rank())];
    const auto most = *std::max_element(shares_.begin(), shares_.end());
    if (rows.size(0) % mine)
      throw comm::CommError("sfb: " + std::to_string(rows.size(0)) + " factor rows are not a multiple of this member's share " +
                            std::to_string(mine));
    const auto want = rows.size(0) / mine * most;
    if (want == rows.size(0)) return rows;
    return torch::cat({rows, torch::zeros({want - rows.size(0), rows.size(1)}, rows.options())});
  }

  void complete(std::size_t item) override {
    const int p = items_[item].front();
    auto& f = factors_[p];
    try {
      f.wa->wait(group_.timeout());
      f.wd->wait(group_.timeout());
    } catch (const std::exception& e) {
      fail("all-gather of the sufficient factors of '" + params_[p].first + "'", e);
    }
    // ∇W = Σ_k δ_k a_kᵀ over every rank's rows: one GEMM, in the factors' dtype.
    set_grad(p, torch::cat(f.d_out[0]).t().mm(torch::cat(f.a_out[0])).to(params_[p].second.scalar_type()));
    event("sfb " + params_[p].first, f.start);
    auto next = std::move(f.a_next);
    f = Factors{f.m, f.n};
    f.a = std::move(next);
  }

  std::vector<Factors> factors_;
  std::map<graph::OpId, int> by_op_;
  std::vector<std::int64_t> shares_;  // by member; empty: equal rows
};

}  // namespace

std::unique_ptr<GradSync> make_sfb_sync(comm::Group group, NamedParams params, const graph::OpGraph& graph,
                                        std::vector<std::int64_t> shares) {
  std::vector<std::vector<int>> items;
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) items.push_back({i});
  return std::make_unique<SfbSync>(std::move(group), std::move(params), std::move(items), graph, std::move(shares));
}

}  // namespace trident::sync
