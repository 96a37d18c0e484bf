#include "trident/data/sampler.h"

#include <stdexcept>

#include "trident/data/dataset.h"

namespace trident::data {

EpochSampler::EpochSampler(std::int64_t dataset_size, std::int64_t batch, std::uint64_t seed, bool shuffle)
    : size_(dataset_size), batch_(batch), steps_per_epoch_(batch > 0 ? dataset_size / batch : 0), seed_(seed),
      shuffle_(shuffle) {
  if (steps_per_epoch_ < 1) {
    throw DataError("train.mini_batch = " + std::to_string(batch) + " must be between 1 and the " +
                    "training set size " + std::to_string(dataset_size));
  }
}

torch::Tensor EpochSampler::batch_indices(std::int64_t step) {
  const std::int64_t epoch = epoch_of(step);
  if (epoch != cached_epoch_) {
    // A distinct, well-mixed seed per (seed, epoch).
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ * 1000003ULL + static_cast<std::uint64_t>(epoch) + 1);
    order_ = shuffle_ ? torch::randperm(size_, gen, torch::kInt64) : torch::arange(size_, torch::kInt64);
    cached_epoch_ = epoch;
  }
  const std::int64_t first = (step % steps_per_epoch_) * batch_;
  return order_.slice(0, first, first + batch_);
}

std::pair<std::int64_t, std::int64_t> shard_range(std::int64_t rows, std::int64_t part, std::int64_t parts) {
  if (parts < 1 || part < 0 || part >= parts) {
    throw DataError("shard " + std::to_string(part) + " of " + std::to_string(parts) + " does not exist",
                    ErrorKind::kFailure);
  }
  const std::int64_t base = rows / parts, extra = rows % parts;
  const std::int64_t begin = part * base + std::min(part, extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

}  // namespace trident::data
