// See Note [Sparse Adagrad] in sparse_adagrad.h.
#include "trident/optim/sparse_adagrad.h"

#include <stdexcept>

namespace trident::optim {

SparseAdagrad::SparseAdagrad(torch::Tensor table, double eps)
    : table_(std::move(table)), state_(torch::zeros_like(table_)), eps_(eps) {}

void SparseAdagrad::step(const torch::Tensor& rows, const torch::Tensor& grads, double lr) {
  torch::NoGradGuard no_grad;
  if (!rows.numel()) return;
  const auto g = grads.to(table_.scalar_type());
  const auto sum = state_.index_select(0, rows) + g * g;
  state_.index_copy_(0, rows, sum);
  table_.index_copy_(0, rows, table_.index_select(0, rows) - lr * g / (sum.sqrt() + eps_));
}

void SparseAdagrad::load_state(torch::Tensor state) {
  if (state.sizes() != table_.sizes())
    throw std::invalid_argument("sparse Adagrad state " + c10::str(state.sizes()) + " does not fit its table " +
                                c10::str(table_.sizes()));
  state_ = std::move(state);
}

}  // namespace trident::optim
