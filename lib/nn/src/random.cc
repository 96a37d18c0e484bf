// See Note [Random ops] in random.h.
#include "trident/nn/random.h"

#include "trident/nn/graph_module.h"

namespace trident::nn {
namespace {
thread_local std::optional<RandomKey> current;
}  // namespace

RandomScope::RandomScope(RandomKey key) : previous_(current) { current = key; }
RandomScope::~RandomScope() { current = previous_; }

std::optional<std::uint64_t> random_seed_for(const std::string& op, int call) {
  if (!current) return std::nullopt;
  const std::string name = op + "#" + std::to_string(call) + "@" + std::to_string(current->step) + "/" +
                           std::to_string(current->micro_batch);
  return parameter_seed(current->seed, name);
}

std::optional<RandomKey> random_key() { return current; }

}  // namespace trident::nn
