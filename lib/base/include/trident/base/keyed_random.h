// A counter-based random generator keyed by a tuple of integers, for draws
// that must be a pure function of what they are about (Note [Keyed
// augmentation] in images/transforms.h, Note [Neighbour sampling] in
// gnn/sampling.h): never by a thread, worker, rank, stage or plan.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace trident {

// splitmix64 over the key's parts (h = mix(k0); h = mix(h ^ k_i)), then its
// stream. Uniform draws take the top 53 bits (no library distribution,
// whose algorithm differs between standard libraries).
class KeyedRandom {
 public:
  explicit KeyedRandom(std::initializer_list<std::uint64_t> key);
  std::uint64_t next();
  double uniform(double lo, double hi);  // [lo, hi)
  std::int64_t below(std::int64_t n);    // [0, n), n >= 1

 private:
  std::uint64_t state_;
};

}  // namespace trident
