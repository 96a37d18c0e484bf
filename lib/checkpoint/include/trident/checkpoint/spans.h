// A tensor that ranks wrote as flat spans of it, KEY@OFFSET each (a
// parameter server's optimizer state, a node embedding's rows): read back
// whole, whichever ranks and how many wrote it.
#pragma once

#include <string>

#include <torch/torch.h>

#include "trident/checkpoint/sharded_checkpoint.h"

namespace trident::checkpoint {

// The spans KEY@OFFSET of `reader`, flattened and joined in offset order
// from offset 0 up to the first gap (an empty tensor when there are none).
torch::Tensor read_spans(const CheckpointReader& reader, const std::string& key);

}  // namespace trident::checkpoint
