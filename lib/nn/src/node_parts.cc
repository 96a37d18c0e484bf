// See Note [Node partitions] in nn/node_parts.h.
#include "trident/nn/node_parts.h"

namespace trident::nn {
namespace {
thread_local std::shared_ptr<const NodeParts> current;
}  // namespace

std::vector<std::int64_t> even_bounds(std::int64_t nodes, int parts) {
  std::vector<std::int64_t> b{0};
  for (int p = 0; p < parts; ++p) b.push_back(b.back() + nodes / parts + (p < nodes % parts ? 1 : 0));
  return b;
}

NodePartScope::NodePartScope(std::shared_ptr<const NodeParts> parts) : previous_(std::move(current)) {
  current = std::move(parts);
}
NodePartScope::~NodePartScope() { current = std::move(previous_); }

const std::shared_ptr<const NodeParts>& node_parts() { return current; }

}  // namespace trident::nn
