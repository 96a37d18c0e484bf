// Comparing two checkpoints tensor by tensor (`trident diff`): what tests and
// users rely on when they ask "did these two runs train the same weights?"
// — rather than a printed accuracy.
#pragma once

#include <string>
#include <vector>

#include "trident/checkpoint/sharded_checkpoint.h"

namespace trident::checkpoint {

struct CheckpointDiff {
  std::vector<std::string> only_a, only_b;  // keys present on one side
  std::vector<std::string> shape_differs;   // same key, different shape or dtype
  std::vector<std::string> value_differs;   // not allclose(a, b, rtol, atol)
  std::size_t compared = 0;                 // keys present on both sides
  double max_abs = 0;                       // the largest |a - b| over those
  std::string max_abs_key;
  bool equal() const { return only_a.empty() && only_b.empty() && shape_differs.empty() && value_differs.empty(); }
};

// Compares the tensors whose keys start with `prefix` ("param/": weights;
// "": weights, optimizer state, node embeddings) with torch::allclose(a, b,
// rtol, atol). A tensor that ranks wrote as flat spans (KEY@OFFSET: a
// parameter server's optimizer state, a node embedding's rows) is compared
// whole, so checkpoints of different process counts compare.
CheckpointDiff diff_checkpoints(const CheckpointReader& a, const CheckpointReader& b, const std::string& prefix,
                                double rtol, double atol);

}  // namespace trident::checkpoint
