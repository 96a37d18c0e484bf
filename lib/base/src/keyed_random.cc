#include "trident/base/keyed_random.h"

namespace trident {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

KeyedRandom::KeyedRandom(std::initializer_list<std::uint64_t> key) : state_(0) {
  bool first = true;
  for (auto k : key) state_ = first ? splitmix(k) : splitmix(state_ ^ k), first = false;
}

std::uint64_t KeyedRandom::next() {
  state_ += 0x9E3779B97F4A7C15ULL;
  return splitmix(state_);
}

double KeyedRandom::uniform(double lo, double hi) { return lo + (hi - lo) * (next() >> 11) * 0x1.0p-53; }

std::int64_t KeyedRandom::below(std::int64_t n) {
  return static_cast<std::int64_t>((next() >> 11) * 0x1.0p-53 * static_cast<double>(n));
}

}  // namespace trident
