// Internal to nn: the casts that carry out Note [Precision policy]
// (graph/precision.h) on tensors, on trident's ops and on the calls of
// captured ATen programs.
#pragma once

#include <vector>

#include <ATen/core/stack.h>
#include <torch/torch.h>

#include "trident/graph/precision.h"

namespace trident::nn {

// Under bf16: a kLow op's floating inputs to bf16, a kFp32 op's to fp32, a
// kFollow op's to fp32 when they are not all of one dtype. Integer tensors
// (labels, indices) are never cast.
void cast_inputs(std::vector<torch::Tensor>& inputs, graph::OpPrecision cls);
// The same for a boxed call's arguments (tensors and lists of tensors).
void cast_stack(torch::jit::Stack& stack, graph::OpPrecision cls);

// CPU (and CUDA) autocast to bf16 on this thread while alive, its cast
// cache off: a layer's fp32 weights are cast at each use, so an update in
// place is always seen and a first forward without gradients leaves no
// copy behind (see Note [Precision policy]). Restores what it found.
class Bf16Autocast {
 public:
  Bf16Autocast();
  ~Bf16Autocast();
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  bool cpu_, gpu_, cache_;
  at::ScalarType cpu_dtype_, gpu_dtype_;
};

}  // namespace trident::nn
