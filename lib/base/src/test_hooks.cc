#include "trident/base/test_hooks.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace trident::test_hooks {

std::optional<RankStep> parse_rank_step(const char* text) {
  RankStep out;
  long long step = -1;
  char rest[8] = "";
  int end = 0;
  if (!text || std::sscanf(text, "%d:%lld%n", &out.rank, &step, &end) != 2) return std::nullopt;
  if (text[end] != '\0' && (std::sscanf(text + end, ":%7s", rest) != 1 || std::string(rest) != "every"))
    return std::nullopt;
  out.step = step;
  out.every_start = rest[0] != '\0';
  return out;
}

std::optional<RankValue> parse_rank_value(const char* text) {
  RankValue out;
  long long value = 0;
  int end = 0;
  if (!text || std::sscanf(text, "%d:%lld%n", &out.rank, &value, &end) != 2 || text[end] != '\0') return std::nullopt;
  out.value = value;
  return out;
}

std::optional<RankStep> kill_at() { return parse_rank_step(std::getenv("TRIDENT_TEST_KILL_AT")); }
std::optional<RankStep> kill_in_shard() { return parse_rank_step(std::getenv("TRIDENT_TEST_KILL_IN_SHARD")); }

std::int64_t slow_step_ms() {
  const char* v = std::getenv("TRIDENT_TEST_SLOW_STEP_MS");
  return v ? std::max<long long>(0, std::atoll(v)) : 0;
}

std::optional<RankValue> diagnose_delay_ms() { return parse_rank_value(std::getenv("TRIDENT_TEST_DIAGNOSE_DELAY")); }
std::string sample_log_dir() {
  const char* v = std::getenv("TRIDENT_TEST_SAMPLE_LOG");
  return v ? v : "";
}

std::optional<RankValue> slot_down() { return parse_rank_value(std::getenv("TRIDENT_TEST_SLOT_DOWN")); }

}  // namespace trident::test_hooks
