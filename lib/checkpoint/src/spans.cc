// See spans.h.
#include "trident/checkpoint/spans.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace trident::checkpoint {

torch::Tensor read_spans(const CheckpointReader& reader, const std::string& key) {
  std::vector<std::pair<std::int64_t, std::string>> spans;
  for (const auto& k : reader.keys(key + "@")) spans.emplace_back(std::stoll(k.substr(key.size() + 1)), k);
  std::sort(spans.begin(), spans.end());
  std::vector<torch::Tensor> parts;
  std::int64_t at = 0;
  for (const auto& [offset, k] : spans) {
    if (offset != at) break;
    parts.push_back(reader.read(k).reshape({-1}));
    at += parts.back().numel();
  }
  return parts.empty() ? torch::empty({0}) : torch::cat(parts);
}

}  // namespace trident::checkpoint
