// A training config (`trident train --config`): the first line of the input
// is one `--set key=value` (empty: none), the rest the YAML file; parsed and
// checked as `trident train` does before anything starts.
#include "fuzz.h"
#include "trident/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto text = trident::fuzz::text_of(data, size);
  const auto newline = text.find('\n');
  const auto set = text.substr(0, newline);
  const auto yaml = newline == std::string::npos ? std::string() : text.substr(newline + 1);
  std::vector<std::string> overrides;
  if (!set.empty()) overrides.push_back(set);
  trident::fuzz::expect_clear_error([&] { trident::config::parse_config(yaml, overrides, "fuzz.yaml"); });
  return 0;
}
