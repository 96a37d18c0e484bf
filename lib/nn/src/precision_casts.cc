#include "precision_casts.h"

#include <ATen/autocast_mode.h>

namespace trident::nn {
namespace {

using graph::OpPrecision;

bool floating(const torch::Tensor& t) { return t.defined() && t.is_floating_point(); }

// The dtype the class asks of `dtypes` (the floating inputs' dtypes), or
// nullopt to leave them.
std::optional<c10::ScalarType> target(OpPrecision cls, const std::vector<c10::ScalarType>& dtypes) {
  if (cls == OpPrecision::kLow) return torch::kBFloat16;
  if (cls == OpPrecision::kFp32) return torch::kFloat32;
  for (auto d : dtypes)
    if (d != dtypes.front()) return torch::kFloat32;
  return std::nullopt;
}

}  // namespace

void cast_inputs(std::vector<torch::Tensor>& inputs, OpPrecision cls) {
  std::vector<c10::ScalarType> dtypes;
  for (const auto& t : inputs)
    if (floating(t)) dtypes.push_back(t.scalar_type());
  const auto to = target(cls, dtypes);
  if (!to) return;
  for (auto& t : inputs)
    if (floating(t) && t.scalar_type() != *to) t = t.to(*to);
}

void cast_stack(torch::jit::Stack& stack, OpPrecision cls) {
  std::vector<c10::ScalarType> dtypes;
  auto each = [&stack](const std::function<void(torch::Tensor&)>& fn) {
    for (auto& v : stack) {
      if (v.isTensor()) {
        auto t = v.toTensor();
        fn(t);
        v = t;
      } else if (v.isTensorList()) {
        auto list = v.toTensorVector();
        for (auto& t : list) fn(t);
        v = c10::IValue(list);
      }
    }
  };
  each([&](torch::Tensor& t) {
    if (floating(t)) dtypes.push_back(t.scalar_type());
  });
  const auto to = target(cls, dtypes);
  if (!to) return;
  each([&](torch::Tensor& t) {
    if (floating(t) && t.scalar_type() != *to) t = t.to(*to);
  });
}

Bf16Autocast::Bf16Autocast()
    : cpu_(at::autocast::is_cpu_enabled()),
      gpu_(at::autocast::is_enabled()),
      cache_(at::autocast::is_autocast_cache_enabled()),
      cpu_dtype_(at::autocast::get_autocast_cpu_dtype()),
      gpu_dtype_(at::autocast::get_autocast_gpu_dtype()) {
  at::autocast::set_autocast_cache_enabled(false);
  at::autocast::set_autocast_cpu_dtype(torch::kBFloat16);
  at::autocast::set_autocast_gpu_dtype(torch::kBFloat16);
  at::autocast::set_cpu_enabled(true);
  at::autocast::set_enabled(true);
}

Bf16Autocast::~Bf16Autocast() {
  at::autocast::set_cpu_enabled(cpu_);
  at::autocast::set_enabled(gpu_);
  at::autocast::set_autocast_cpu_dtype(cpu_dtype_);
  at::autocast::set_autocast_gpu_dtype(gpu_dtype_);
  at::autocast::set_autocast_cache_enabled(cache_);
}

}  // namespace trident::nn
