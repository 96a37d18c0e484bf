// See Note [Node partitions] in nn/node_parts.h.
#include "trident/nn/node_parts.h"

namespace trident::nn {
namespace {
thread_local std::shared_ptr<const NodeParts> current;
}  // namespace

NodePartScope::NodePartScope(std::shared_ptr<const NodeParts> parts) : previous_(std::move(current)) {
  current = std::move(parts);
}
NodePartScope::~NodePartScope() { current = std::move(previous_); }

const std::shared_ptr<const NodeParts>& node_parts() { return current; }

}  // namespace trident::nn
