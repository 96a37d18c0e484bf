#include "trident/checkpoint/checkpoint_diff.h"

#include <algorithm>

namespace trident::checkpoint {

CheckpointDiff diff_checkpoints(const CheckpointReader& a, const CheckpointReader& b, const std::string& prefix,
                                double rtol, double atol) {
  CheckpointDiff d;
  const auto ka = a.keys(prefix), kb = b.keys(prefix);
  std::set_difference(ka.begin(), ka.end(), kb.begin(), kb.end(), std::back_inserter(d.only_a));
  std::set_difference(kb.begin(), kb.end(), ka.begin(), ka.end(), std::back_inserter(d.only_b));
  std::vector<std::string> both;
  std::set_intersection(ka.begin(), ka.end(), kb.begin(), kb.end(), std::back_inserter(both));
  for (const auto& key : both) {
    ++d.compared;
    const auto ta = a.read(key), tb = b.read(key);
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
