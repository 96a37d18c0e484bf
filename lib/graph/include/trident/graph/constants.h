// A graph's constants: tensors its ops read that are not parameters (a
// captured model's buffers and literals, a zoo GNN's adjacency), stored in
// the graph JSON as {"dtype", "shape", "base64"}. Every constant is decoded
// and checked when a graph enters (OpGraph::from_json), so `trident graph`,
// `plan` and `train` refuse a bad one alike, naming it; nn turns the checked
// bytes into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace trident::graph {

struct Constant {
  std::string dtype;                // one of constant_dtypes()
  std::vector<std::int64_t> shape;  // every size >= 0
  std::string bytes;                // little-endian, C order: numel x the dtype's size
};

// The dtypes a constant may have, with their sizes in bytes.
const std::vector<std::pair<std::string, int>>& constant_dtypes();

// `j` decoded and checked: an object with a dtype trident reads, a shape of
// sizes >= 0 (at most 2^40 elements) and base64 text of exactly the bytes
// the shape and dtype need. Throws GraphError naming `name` and the field.
Constant decode_constant(const std::string& name, const nlohmann::json& j);

}  // namespace trident::graph
