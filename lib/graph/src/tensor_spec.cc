#include "trident/graph/tensor_spec.h"

#include "trident/graph/op_graph.h"

namespace trident::graph {

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt64: return "int64";
  }
  return "?";
}

DType dtype_from_string(const std::string& text) {
  if (text == "float32") return DType::kFloat32;
  if (text == "float16") return DType::kFloat16;
  if (text == "bfloat16") return DType::kBFloat16;
  if (text == "int64") return DType::kInt64;
  throw GraphError("dtype '" + text + "' is unknown; allowed: float32, float16, bfloat16, int64");
}

std::int64_t element_bytes(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt64: return 8;
  }
  return 0;
}

std::int64_t TensorSpec::elements() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void check_shape(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw GraphError(where + ": shape " + to_string(TensorSpec{shape}) + " has a negative dimension");
    if (d > 0 && n > kMostElements / d)
      throw GraphError(where + ": shape " + to_string(TensorSpec{shape}) + " has more than 2^36 elements");
    n *= d;
  }
}

std::string to_string(const TensorSpec& spec) {
  std::string s = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(spec.shape[i]);
  }
  return s + "] " + to_string(spec.dtype);
}

}  // namespace trident::graph
