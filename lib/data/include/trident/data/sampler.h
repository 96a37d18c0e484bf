// Deterministic sample order and sharding.
//
// Epoch e visits a permutation of the training set drawn from a generator
// seeded with (seed, e), so the order is a pure function of the seed, the
// epoch and the dataset size: a resumed or re-planned run sees the same
// global batches. Policy for the last partial batch: it is dropped, so every
// step sees exactly `batch` samples (steps per epoch = floor(N / batch)).
#pragma once

#include <cstdint>
#include <utility>

#include <torch/torch.h>

namespace trident::data {

class EpochSampler {
 public:
  // `shuffle` false: every epoch in the dataset's order (Dataset::in_order).
  EpochSampler(std::int64_t dataset_size, std::int64_t batch, std::uint64_t seed, bool shuffle = true);

  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The global batch of training step `step` (counting across epochs).
  torch::Tensor batch_indices(std::int64_t step);
  std::int64_t epoch_of(std::int64_t step) const { return step / steps_per_epoch_; }

 private:
  std::int64_t size_, batch_, steps_per_epoch_;
  std::uint64_t seed_;
  bool shuffle_ = true;
  std::int64_t cached_epoch_ = -1;
  torch::Tensor order_;
};

// Row range [begin, end) of `part` when `rows` rows are split into `parts`
// contiguous, nearly equal pieces (the first rows % parts pieces get one more).
std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t rows, std::int64_t part, std::int64_t parts);

}  // namespace trident::data
