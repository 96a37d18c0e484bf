#include "trident/tensor/spec.h"

namespace trident::tensor {

torch::ScalarType to_torch(graph::DType dtype) {
  switch (dtype) {
    case graph::DType::kFloat32: return torch::kFloat32;
    case graph::DType::kFloat16: return torch::kFloat16;
    case graph::DType::kBFloat16: return torch::kBFloat16;
    case graph::DType::kInt64: return torch::kInt64;
  }
  return torch::kFloat32;
}

bool matches(const torch::Tensor& t, const graph::TensorSpec& spec) {
  bool ok = t.defined() && t.dim() == static_cast<int64_t>(spec.shape.size()) + 1 &&
            t.scalar_type() == to_torch(spec.dtype);
  for (size_t a = 0; ok && a < spec.shape.size(); ++a) ok = t.size(a + 1) == spec.shape[a];
  return ok;
}

std::string describe(const torch::Tensor& t) {
  if (!t.defined()) return "no tensor";
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? "," : "") + std::to_string(t.size(d));
  return s + "] " + std::string(c10::toString(t.scalar_type()));
}

}  // namespace trident::tensor
