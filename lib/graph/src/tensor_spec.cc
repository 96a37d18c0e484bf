#include "trident/graph/tensor_spec.h"

#include "trident/base/enum_names.h"
#include "trident/base/text.h"
#include "trident/graph/op_graph.h"

namespace trident::graph {
namespace {

const EnumNames<DType>& dtype_names() {  // a function: other files' static tables may call it
  static const EnumNames<DType> names{
      {DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}, {DType::kBFloat16, "bfloat16"}, {DType::kInt64, "int64"}};
  return names;
}

}  // namespace

std::string to_string(DType dtype) { return dtype_names().name(dtype); }

DType dtype_from_string(const std::string& text) {
  if (const auto dtype = dtype_names().parse(text)) return *dtype;
  throw GraphError("dtype '" + text + "' is unknown; allowed: " + join(dtype_names().names()));
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
