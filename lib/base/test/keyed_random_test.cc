// The keyed generator (base/keyed_random.h): every part of the key decides
// the stream, nothing else does; draws stay in their ranges.
#include "trident/base/keyed_random.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace trident {
namespace {

TEST(KeyedRandom, EveryPartOfTheKeyMattersAndNothingElse) {
  auto draw = [](std::uint64_t seed, std::int64_t epoch, std::int64_t id) {
    KeyedRandom r({seed, static_cast<std::uint64_t>(epoch), static_cast<std::uint64_t>(id)});
    return std::vector<std::uint64_t>{r.next(), r.next()};
  };
  EXPECT_EQ(draw(1, 2, 3), draw(1, 2, 3));
  std::set<std::vector<std::uint64_t>> seen{draw(1, 2, 3), draw(2, 2, 3), draw(1, 3, 3), draw(1, 2, 4), draw(0, 0, 0)};
  EXPECT_EQ(seen.size(), 5u);
  KeyedRandom r({7, 0, static_cast<std::uint64_t>(0)});
  for (int i = 0; i < 1000; ++i) {
    const auto u = r.uniform(0.25, 0.5);
    EXPECT_GE(u, 0.25);
    EXPECT_LT(u, 0.5);
    EXPECT_LT(r.below(3), 3);
  }
}

}  // namespace
}  // namespace trident
