// Note [Random ops]
// ~~~~~~~~~~~~~~~~~
// The random operators of an ATen-captured model (dropout's
// bernoulli, stochastic depth) draw from a generator seeded by (run seed,
// step, micro-batch, op, call), not from the process's generator, while a
// RandomScope is open. The runtime opens one around each training forward,
// so a micro-batch draws the same masks whichever process runs its stage:
// a pipeline whose stages are not replicated gives the weights of one
// process with dropout on. A replicated stage runs a slice of the
// micro-batch, so its masks differ from one process's (equal in
// distribution). Without a scope (tests, the profiler), the process's
// generator draws.
//
// Recomputation (see Note [Recomputation] in plan/plan.h) runs a
// micro-batch's forward twice under the same key — once without autograd,
// once right before its backward — so both draw the same masks, and built-in
// dropout is active under a scope whether or not gradients are recorded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trident::nn {

struct RandomKey {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  int micro_batch = 0;
};

// Sets the key for random operators run on this thread until it closes.
class RandomScope {
 public:
  explicit RandomScope(RandomKey key);
  ~RandomScope();
  RandomScope(const RandomScope&) = delete;
  RandomScope& operator=(const RandomScope&) = delete;

 private:
  std::optional<RandomKey> previous_;
};

// The generator seed of call `call` of op `op` under the open scope, or
// nullopt when no scope is open.
std::optional<std::uint64_t> random_seed_for(const std::string& op, int call);

// The open scope's key, or nullopt.
std::optional<RandomKey> random_key();

}  // namespace trident::nn
