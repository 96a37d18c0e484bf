// TensorSpec: the per-sample shape and element type of a tensor that flows
// along an edge of an OpGraph. Shapes exclude the batch dimension, so one
// graph describes every micro-batch size. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trident::graph {

enum class DType { kFloat32, kFloat16, kBFloat16, kInt64 };

// "float32", "float16", "bfloat16", "int64".
std::string to_string(DType dtype);
// Throws GraphError naming the text and the allowed names.
DType dtype_from_string(const std::string& text);
std::int64_t element_bytes(DType dtype);

struct TensorSpec {
  std::vector<std::int64_t> shape;  // per sample, without the batch dimension
  DType dtype = DType::kFloat32;

  std::int64_t elements() const;  // product of shape (1 for a scalar)
  std::int64_t bytes() const { return elements() * element_bytes(dtype); }
  bool operator==(const TensorSpec& other) const {
    return shape == other.shape && dtype == other.dtype;
  }
  bool operator!=(const TensorSpec& other) const { return !(*this == other); }
};

// The most elements one sample's tensor (or one parameter) may have: 2^36,
// 256 GiB of float32, so that sizes summed over a graph and multiplied by a
// batch stay far inside int64.
inline constexpr std::int64_t kMostElements = std::int64_t{1} << 36;

// Throws GraphError ("<where>: shape [..] ...") unless every dimension is
// ≥ 0 and the product is at most kMostElements; for shapes read from files.
void check_shape(const std::vector<std::int64_t>& shape, const std::string& where);

// "[1,28,28] float32"
std::string to_string(const TensorSpec& spec);

}  // namespace trident::graph
