#include "ordered_sync.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace trident::sync::detail {
namespace {

struct ReadyHook final : torch::autograd::FunctionPostHook {
  ReadyHook(std::shared_ptr<HookState> s, int p) : state(std::move(s)), param(p) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override;
  std::shared_ptr<HookState> state;
  int param;
};

torch::autograd::variable_list ReadyHook::operator()(const torch::autograd::variable_list& outputs,
                                                     const torch::autograd::variable_list&) {
  std::lock_guard<std::mutex> lock(state->mu);
  if (state->owner) state->owner->mark_ready(param);
  return outputs;
}

}  // namespace

OrderedSync::OrderedSync(comm::Group group, NamedParams params, std::vector<std::vector<int>> items, bool wfbp)
    : group_(std::move(group)), params_(std::move(params)), items_(std::move(items)),
      state_(std::make_shared<HookState>()), wfbp_(wfbp) {
  item_of_.assign(params_.size(), -1);
  for (std::size_t i = 0; i < items_.size(); ++i)
    for (int p : items_[i]) item_of_[p] = static_cast<int>(i);
  ready_.assign(items_.size(), 0);
  state_->owner = this;
}

OrderedSync::~OrderedSync() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->owner = nullptr;
}

void OrderedSync::install_grad_hooks() {
  for (int i = 0; i < static_cast<int>(params_.size()); ++i) {
    if (item_of_[i] < 0) continue;
    auto acc = torch::autograd::impl::grad_accumulator(params_[i].second);
    if (!acc) throw comm::CommError("gradient sync: parameter '" + params_[i].first + "' does not require grad");
    acc->add_post_hook(std::make_unique<ReadyHook>(state_, i));
    accumulators_.push_back(std::move(acc));  // keeps the node, and so the hook, alive
  }
}

void OrderedSync::arm() {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::fill(ready_.begin(), ready_.end(), 0);
  next_ = 0;
  armed_ = true;
  start_ = std::chrono::steady_clock::now();
  stats_.events.clear();
}

void OrderedSync::mark_ready(int param) {
  if (!armed_ || item_of_[param] < 0) return;
  ++ready_[item_of_[param]];
  if (!wfbp_) return;
  while (next_ < items_.size() && ready_[next_] == static_cast<int>(items_[next_].size())) launch(next_++);
}

void OrderedSync::finish() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!armed_) throw comm::CommError("gradient sync: finish() without arm()");
  stats_.backward_end_s = seconds();
  while (next_ < items_.size()) launch(next_++);
  for (std::size_t i = 0; i < items_.size(); ++i) complete(i);
  double last = stats_.backward_end_s;
  for (const auto& e : stats_.events) last = std::max(last, e.end_s);
  stats_.exposed_s = last - stats_.backward_end_s;
  armed_ = false;
}

void OrderedSync::apply(const Update& update) {
  for (auto& [name, param] : params_) {
    if (!param.grad().defined()) continue;
    update(name, param, param.grad());
  }
}

double OrderedSync::grad_square_sum() {
  if (group_.rank() != 0) return 0;
  double sum = 0;
  for (const auto& [name, param] : params_) sum += square_sum(param.grad());
  return sum;
}

double OrderedSync::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

torch::Tensor OrderedSync::grad_or_zeros(int param) const {
  const auto& p = params_[param].second;
  return p.grad().defined() ? p.grad() : torch::zeros_like(p);
}

void OrderedSync::set_grad(int param, const torch::Tensor& value) {
  auto& p = params_[param].second;
  if (p.grad().defined()) {
    p.mutable_grad().copy_(value.view_as(p));
  } else {
    p.mutable_grad() = value.view_as(p).clone();
  }
}

void OrderedSync::fail(const std::string& what, const std::exception& e) const {
  const auto lost = group_.diagnose();
  throw comm::CommError(group_.member(group_.rank()) + ": " + what + " failed" +
                        (lost.empty() ? "" : " (" + lost + ")") + ": " + first_line(e));
}

std::vector<std::vector<int>> reverse_buckets(const NamedParams& params, std::int64_t bucket_bytes) {
  if (bucket_bytes < 1) throw comm::CommError("gradient sync: bucket size must be >= 1 byte");
  std::vector<std::vector<int>> buckets;
  cost::BucketPacker packer(bucket_bytes);  // See Note [Gradient buckets]
  for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
    const auto& t = params[i].second;
    if (packer.add(t.numel() * static_cast<std::int64_t>(t.element_size()))) buckets.emplace_back();
    buckets.back().push_back(i);
  }
  return buckets;
}

}  // namespace trident::sync::detail

namespace trident::sync {

double square_sum(const torch::Tensor& t) {
  if (!t.defined()) return 0;
  torch::NoGradGuard no_grad;
  return t.to(torch::kFloat64).pow(2).sum().item<double>();
}

}  // namespace trident::sync
