#include "trident/graph/constants.h"

#include "trident/base/json.h"
#include "trident/base/text.h"
#include "trident/graph/op_graph.h"

namespace trident::graph {

const std::vector<std::pair<std::string, int>>& constant_dtypes() {
  static const std::vector<std::pair<std::string, int>> kDtypes = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8},
      {"int32", 4},   {"int16", 2},   {"int8", 1},    {"uint8", 1},    {"bool", 1}};
  return kDtypes;
}

namespace {

int item_size(const std::string& dtype, const std::string& where) {
  std::vector<std::string> names;
  for (const auto& [name, size] : constant_dtypes()) {
    if (name == dtype) return size;
    names.push_back(name);
  }
  throw GraphError(where + ": dtype '" + dtype + "' is not one trident reads; allowed: " + join(names));
}

}  // namespace

Constant decode_constant(const std::string& name, const nlohmann::json& j) {
  const std::string where = "graph constant '" + name + "'";
  if (!j.is_object()) throw GraphError(where + " must be an object {\"dtype\", \"shape\", \"base64\"}");
  for (const char* key : {"dtype", "shape", "base64"})
    if (!j.contains(key)) throw GraphError(where + " has no '" + key + "'; a constant is {\"dtype\", \"shape\", \"base64\"}");
  if (!j.at("dtype").is_string()) throw GraphError(where + ": 'dtype' must be a string");
  if (!j.at("base64").is_string()) throw GraphError(where + ": 'base64' must be a string");
  Constant c;
  c.dtype = j.at("dtype").get<std::string>();
  const int item = item_size(c.dtype, where);
  const auto& shape = j.at("shape");
  if (!shape.is_array()) throw GraphError(where + ": 'shape' must be a list of sizes");
  std::int64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
      throw GraphError(where + ": 'shape' " + shape.dump() + " must hold sizes >= 0");
    c.shape.push_back(d.get<std::int64_t>());
    if (c.shape.back() > 0 && numel > (std::int64_t{1} << 40) / c.shape.back())
      throw GraphError(where + ": 'shape' " + shape.dump() + " is too large");
    numel *= c.shape.back();
  }
  try {
    c.bytes = base64_decode(j.at("base64").get<std::string>());
  } catch (const InputError& e) {
    throw GraphError(where + ": 'base64' is not base64 text (" + e.what() + ")");
  }
  if (static_cast<std::int64_t>(c.bytes.size()) != numel * item)
    throw GraphError(where + " holds " + std::to_string(c.bytes.size()) + " bytes; its shape " + shape.dump() +
                     " and dtype " + c.dtype + " need " + std::to_string(numel * item));
  return c;
}

}  // namespace trident::graph
