// Note [Sparse Adagrad]
// ~~~~~~~~~~~~~~~~~~~~~
// Learnable node embeddings (model.node_embedding, docs/gnn.md) are rows of
// a table that only their owner holds (Note [Row store] in
// sync/row_store.h); a step updates only the rows its batches touched,
// owner-side, as DistDGL's SparseAdagrad does: per touched row r with
// summed gradient g, G_r += g * g (element-wise), then
// w_r -= lr * g / (sqrt(G_r) + eps). Untouched rows and their G stay as
// they are, so the update of a row is the same whichever process owns it
// and however the batches were split.
#pragma once

#include <torch/torch.h>

namespace trident::optim {

class SparseAdagrad {
 public:
  // Updates `table` [rows, D] in place; G starts at zero.
  explicit SparseAdagrad(torch::Tensor table, double eps = 1e-10);

  // `rows`: int64 [n], distinct row indices of the table; `grads`: [n, D].
  void step(const torch::Tensor& rows, const torch::Tensor& grads, double lr);

  const torch::Tensor& table() const { return table_; }
  const torch::Tensor& state() const { return state_; }  // G, [rows, D]
  // Throws std::invalid_argument when `state` is not the table's shape.
  void load_state(torch::Tensor state);

 private:
  torch::Tensor table_, state_;
  double eps_;
};

}  // namespace trident::optim
