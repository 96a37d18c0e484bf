// Gradient buckets: how gradients are grouped into one collective each. The
// runtime (comm's all-reduce and parameter server) packs them with this and
// the planner's estimate prices what it packs, so the two cannot drift.
// Torch-free.
//
// Note [Gradient buckets]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Gradients are synced in buckets (parallel.bucket_mb, default
// kDefaultBucketBytes): the parameters in reverse order — the order backward
// completes them — a new bucket whenever the next would overflow the size (a
// parameter larger than the size gets a bucket of its own), each bucket sent
// once its last gradient is ready. One all-reduce per bucket: Gloo's
// per-call cost makes one 1 MiB bucket far cheaper than six separate tensors.
#pragma once

#include <cstdint>

namespace trident::cost {

// PyTorch DDP's default: large enough that per-message latency is small
// against the bytes, small enough that the first bucket starts early in
// backward.
inline constexpr std::int64_t kDefaultBucketBytes = std::int64_t{25} << 20;
inline constexpr double kBytesPerMiB = 1024.0 * 1024.0;

// Packs tensors offered one at a time, in backward order.
class BucketPacker {
 public:
  // Throws InputError for a size below 1 byte (callers check
  // their input first and name it).
  explicit BucketPacker(std::int64_t bucket_bytes);
  // Adds a tensor of `bytes`; true when it opens a new bucket (the one
  // before it, if any, is then complete).
  bool add(std::int64_t bytes);
  int buckets() const { return buckets_; }

 private:
  std::int64_t bucket_bytes_;
  std::int64_t filled_ = 0;
  int buckets_ = 0;
};

}  // namespace trident::cost
