#include "trident/checkpoint/checkpoint_diff.h"

#include "trident/checkpoint/spans.h"

#include <algorithm>
#include <set>

namespace trident::checkpoint {

namespace {

// A key without its span, "NAME@OFFSET" -> "NAME" (a tensor sharded by ranks as flat spans).
std::string whole_key(const std::string& key) { return key.substr(0, key.rfind('@')); }

std::vector<std::string> whole_keys(const CheckpointReader& r, const std::string& prefix) {
  std::set<std::string> keys;
  for (const auto& k : r.keys(prefix)) keys.insert(whole_key(k));
  return {keys.begin(), keys.end()};
}

// The tensor `key` names: itself, or its spans in offset order, flattened.
torch::Tensor read_whole(const CheckpointReader& r, const std::string& key) {
  return r.has(key) ? r.read(key) : read_spans(r, key);
}

}  // namespace

CheckpointDiff diff_checkpoints(const CheckpointReader& a, const CheckpointReader& b, const std::string& prefix,
                                double rtol, double atol) {
  CheckpointDiff d;
  const auto ka = whole_keys(a, prefix), kb = whole_keys(b, prefix);
  std::set_difference(ka.begin(), ka.end(), kb.begin(), kb.end(), std::back_inserter(d.only_a));
  std::set_difference(kb.begin(), kb.end(), ka.begin(), ka.end(), std::back_inserter(d.only_b));
  std::vector<std::string> both;
  std::set_intersection(ka.begin(), ka.end(), kb.begin(), kb.end(), std::back_inserter(both));
  for (const auto& key : both) {
    ++d.compared;
    auto ta = read_whole(a, key), tb = read_whole(b, key);
    if (!a.has(key) || !b.has(key)) ta = ta.reshape({-1}), tb = tb.reshape({-1});  // spans on one side: compare flat
    if (ta.sizes() != tb.sizes() || ta.scalar_type() != tb.scalar_type()) {
      d.shape_differs.push_back(key);
      continue;
    }
    if (ta.numel() == 0) continue;
    const auto fa = ta.to(torch::kFloat64), fb = tb.to(torch::kFloat64);
    const double worst = (fa - fb).abs().max().item<double>();
    if (d.max_abs_key.empty() || worst > d.max_abs) d.max_abs = worst, d.max_abs_key = key;
    if (!torch::allclose(fa, fb, rtol, atol)) d.value_differs.push_back(key);
  }
  return d;
}

}  // namespace trident::checkpoint
