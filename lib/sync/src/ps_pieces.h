// Internal to the parameter server (ps_sync.cc): how a bucket is cut into
// pieces, and the pool their buffers come from.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include <torch/torch.h>

namespace trident::sync::detail {


// Where a bucket's parameters sit in its flat elements, which block this
// member serves, and how the blocks are cut into pieces.
struct Layout {
  std::vector<int> params;             // indices into the sync's parameters
  std::vector<std::int64_t> offset;    // of each, in the bucket's flat elements
  std::vector<std::int64_t> sizes;     // of each, its elements
  std::int64_t elements = 0, block = 0;  // n, and ⌈n / P⌉
  std::int64_t chunk = 1;              // elements of a block per piece (the last piece shorter)
  int pieces = 1;
  std::int64_t begin(int member) const { return std::min(member * block, elements); }
  std::int64_t end(int member) const { return std::min((member + 1) * block, elements); }
  std::int64_t length(int k) const { return std::min(chunk, block - k * chunk); }
  // Calls f(parameter, offset in it, offset from lo, count) for each
  // parameter's share of bucket elements [lo, hi).
  template <class F>
  void segments(std::int64_t lo, std::int64_t hi, F&& f) const {
    for (std::size_t k = 0; k < params.size(); ++k) {
      const auto a = std::max(lo, offset[k]), z = std::min(hi, offset[k] + sizes[k]);
      if (z > a) f(params[k], a - offset[k], a - lo, z - a);
    }
  }
};

// Note [PS buffers]
// ~~~~~~~~~~~~~~~~~
// Pieces take their buffers from one pool, each
// buffer a piece's full size, and give them back: a fresh large
// allocation is a fresh mapping whose every page faults on first touch,
// which on the 2-core machine cost more than the copies themselves. The
// pool holds at most what pieces held at once (SyncStats::buffer_bytes),
// which Note [PS pieces] bounds. Pushes are in the push dtype, pulls in the
// parameters' dtype.
class BufferPool {
 public:
  BufferPool() = default;
  BufferPool(std::int64_t capacity, torch::TensorOptions options) : capacity_(capacity), options_(std::move(options)) {}
  std::int64_t capacity() const { return capacity_; }  // elements of a buffer: the widest piece
  torch::Tensor acquire(torch::ScalarType dtype) {
    auto& free = free_[dtype];
    torch::Tensor t;
    if (!free.empty()) {
      t = std::move(free.back());
      free.pop_back();
    } else {
      t = torch::empty({capacity_}, options_.dtype(dtype));
      bytes_ += bytes_of(t);
    }
    held_ += bytes_of(t);
    return t;
  }
  // Gives `t` back (nothing when undefined) and leaves it undefined.
  void release(torch::Tensor& t) {
    if (!t.defined()) return;
    held_ -= bytes_of(t);
    free_[t.scalar_type()].push_back(std::move(t));
    t = torch::Tensor();
  }
  // An arrived pull waiting to land: held, but not in flight.
  void park(const torch::Tensor& t) { parked_ += bytes_of(t); }
  void unpark(const torch::Tensor& t) { parked_ -= bytes_of(t); }
  std::int64_t active() const { return held_ - parked_; }  // bytes held by pieces in flight
  std::int64_t bytes() const { return bytes_; }            // every buffer made, held or free

 private:
  static std::int64_t bytes_of(const torch::Tensor& t) { return t.numel() * static_cast<std::int64_t>(t.element_size()); }
  std::int64_t capacity_ = 0;
  torch::TensorOptions options_;
  std::map<torch::ScalarType, std::vector<torch::Tensor>> free_;
  std::int64_t bytes_ = 0, held_ = 0, parked_ = 0;
};

}  // namespace trident::sync::detail
