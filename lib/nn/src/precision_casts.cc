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

// Autocast settings by device type. See LIBTORCH-NOTES: autocast is per thread.
namespace {
bool enabled(bool cpu) { return at::autocast::is_autocast_enabled(cpu ? at::kCPU : at::kCUDA); }
void enable(bool cpu, bool on) { at::autocast::set_autocast_enabled(cpu ? at::kCPU : at::kCUDA, on); }
at::ScalarType dtype(bool cpu) { return at::autocast::get_autocast_dtype(cpu ? at::kCPU : at::kCUDA); }
void set_dtype(bool cpu, at::ScalarType t) { at::autocast::set_autocast_dtype(cpu ? at::kCPU : at::kCUDA, t); }
}  // namespace

Bf16Autocast::Bf16Autocast()
    : cpu_(enabled(true)),
      gpu_(enabled(false)),
      cache_(at::autocast::is_autocast_cache_enabled()),
      cpu_dtype_(dtype(true)),
      gpu_dtype_(dtype(false)) {
  at::autocast::set_autocast_cache_enabled(false);
  set_dtype(true, torch::kBFloat16);
  set_dtype(false, torch::kBFloat16);
  enable(true, true);
  enable(false, true);
}

Bf16Autocast::~Bf16Autocast() {
  enable(true, cpu_);
  enable(false, gpu_);
  set_dtype(true, cpu_dtype_);
  set_dtype(false, gpu_dtype_);
  at::autocast::set_autocast_cache_enabled(cache_);
}

}  // namespace trident::nn
