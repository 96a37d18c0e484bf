// Test hooks: the fault injection and slow-downs that trident's own tests
// ask for through the environment, named and parsed in this one place.
//
// Note [Test hooks]
// ~~~~~~~~~~~~~~~~~
// Each hook is a TRIDENT_TEST_* variable that users never set; unset (or
// malformed) means "no fault". They let end-to-end tests make one rank of a
// real job misbehave at a chosen point:
//   TRIDENT_TEST_KILL_AT=R:N[:every]  rank R kills itself (SIGKILL) after step N, on the
//                                     first start only, or on every start with `every`
//   TRIDENT_TEST_KILL_IN_SHARD=R:N    rank R kills itself halfway through writing its shard
//                                     of the step-N checkpoint
//   TRIDENT_TEST_SLOW_STEP_MS=MS      in step k, rank k mod P sleeps MS milliseconds
//   TRIDENT_TEST_DIAGNOSE_DELAY=R:MS  rank R waits MS milliseconds before diagnosing a lost peer
//   TRIDENT_TEST_SLOT_DOWN=S:K        the worker on slot S fails to start from restart K on
//   TRIDENT_TEST_SAMPLE_LOG=DIR       each rank appends to DIR/samples.rank<R>.txt a line per
//                                     field of a training sample it is given: the step, the
//                                     sample id, the field and a hash of its bytes (data tests)
// (TRIDENT_TEST_BLAS_STANDIN is read by the stand-in BLAS library of
// tools/trident/test, which links nothing of trident's.) Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace trident::test_hooks {

// A rank and a step: "R:N", or "R:N:every" (every_start).
struct RankStep {
  int rank = -1;
  std::int64_t step = -1;
  bool every_start = false;
};

// A rank (or slot) and a number of milliseconds or restarts: "R:X".
struct RankValue {
  int rank = -1;
  std::int64_t value = 0;
};

std::optional<RankStep> kill_at();
std::optional<RankStep> kill_in_shard();
std::int64_t slow_step_ms();  // 0 when unset
std::optional<RankValue> diagnose_delay_ms();
std::optional<RankValue> slot_down();
std::string sample_log_dir();  // "" when unset

// The parsers behind them, for tests of their own.
std::optional<RankStep> parse_rank_step(const char* text);
std::optional<RankValue> parse_rank_value(const char* text);

}  // namespace trident::test_hooks
