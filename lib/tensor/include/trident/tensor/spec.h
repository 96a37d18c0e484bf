// Torch tensors as the op graph describes them: the one mapping of a graph
// dtype to torch's, the check an edge or a dataset field makes of a batch
// against its per-sample spec, and how a tensor is named in messages. The
// smallest torch component: nn, data and the executor all use it, so data
// needs nothing of nn.
#pragma once

#include <string>

#include <torch/torch.h>

#include "trident/graph/tensor_spec.h"

namespace trident::tensor {

torch::ScalarType to_torch(graph::DType dtype);

// Whether `t` is a batch of `spec`: one leading batch axis, then spec's
// per-sample shape, with spec's dtype.
bool matches(const torch::Tensor& t, const graph::TensorSpec& spec);

// "[6,1,28,28] Float" (or "no tensor"), for messages.
std::string describe(const torch::Tensor& t);

}  // namespace trident::tensor
