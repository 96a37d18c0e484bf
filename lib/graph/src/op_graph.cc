#include "trident/graph/op_graph.h"

#include "trident/graph/aten_program.h"

#include <algorithm>
#include <queue>

namespace trident::graph {

std::int64_t ParamSpec::bytes() const {
  std::int64_t n = element_bytes(dtype);
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t Op::param_bytes() const {
  std::int64_t n = 0;
  for (const auto& p : params) n += p.bytes();
  return n;
}

OpId OpGraph::add(Op op) {
  if (op.name.empty()) throw GraphError("op of kind '" + op.kind + "' has an empty name");
  if (by_name_.count(op.name)) throw GraphError("op '" + op.name + "' is defined twice");
  const OpId id = size();
  for (const auto& in : op.inputs) {
    if (in.producer < 0 || in.producer >= id) {
      throw GraphError("op '" + op.name + "' reads op id " + std::to_string(in.producer) +
                       ", which does not exist yet");
    }
  }
  for (const auto& in : op.inputs) {
    auto& cons = consumers_[in.producer];
    if (cons.empty() || cons.back() != id) cons.push_back(id);
  }
  if (op.attrs.is_null()) op.attrs = nlohmann::json::object();
  by_name_[op.name] = id;
  ops_.push_back(std::move(op));
  consumers_.emplace_back();
  return id;
}

void OpGraph::set_attr(OpId id, const std::string& key, nlohmann::json value) {
  op(id);  // the range check
  ops_[static_cast<std::size_t>(id)].attrs[key] = std::move(value);
}

const Op& OpGraph::op(OpId id) const {
  if (id < 0 || id >= size()) {
    throw GraphError("op id " + std::to_string(id) + " is out of range [0, " +
                     std::to_string(size()) + ")");
  }
  return ops_[id];
}

std::optional<OpId> OpGraph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

OpId OpGraph::id_of(const std::string& name) const {
  auto id = find(name);
  if (!id) throw GraphError("graph '" + name_ + "' has no op named '" + name + "'");
  return *id;
}

const std::vector<OpId>& OpGraph::consumers(OpId id) const {
  op(id);  // range check
  return consumers_[id];
}

std::vector<OpId> OpGraph::topo_order() const {
  // consumers_ lists a consumer once even when it reads a producer twice,
  // so count distinct producers.
  std::vector<int> pending(size(), 0);
  for (OpId id = 0; id < size(); ++id) {
    std::set<OpId> distinct;
    for (const auto& in : ops_[id].inputs) distinct.insert(in.producer);
    pending[id] = static_cast<int>(distinct.size());
  }
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (OpId id = 0; id < size(); ++id) {
    if (pending[id] == 0) ready.push(id);
  }
  std::vector<OpId> order;
  while (!ready.empty()) {
    OpId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (OpId c : consumers_[id]) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  if (static_cast<std::int32_t>(order.size()) != size()) {
    for (OpId id = 0; id < size(); ++id) {
      if (pending[id] > 0) throw GraphError("graph '" + name_ + "' has a cycle through op '" + ops_[id].name + "'");
    }
  }
  return order;
}

bool OpGraph::classifies(const std::string& loss_kind) {
  return loss_kind == "cross_entropy" || loss_kind == "masked_cross_entropy";
}

bool OpGraph::per_token(const Op& loss) {
  return loss.kind == "cross_entropy" && !loss.inputs.empty() && loss.inputs[0].expected.shape.size() > 1;
}

const std::set<std::string>& OpGraph::loss_kinds() {
  static const std::set<std::string> kinds = {"cross_entropy", "mse", "masked_cross_entropy"};
  return kinds;
}

OpId OpGraph::loss() const {
  std::optional<OpId> found;
  for (OpId id = 0; id < size(); ++id) {
    if (!loss_kinds().count(ops_[id].kind)) continue;
    if (found) {
      throw GraphError("graph '" + name_ + "' has two loss ops, '" + ops_[*found].name + "' and '" +
                       ops_[id].name + "'; exactly one is allowed");
    }
    found = id;
  }
  if (!found) throw GraphError("graph '" + name_ + "' has no loss op (cross_entropy, masked_cross_entropy or mse)");
  return *found;
}

void OpGraph::validate() const {
  if (ops_.empty()) throw GraphError("graph '" + name_ + "' is empty");
  topo_order();  // throws on a cycle
  const OpId sink = loss();
  for (OpId id = 0; id < size(); ++id) {
    const Op& o = ops_[id];
    if (o.is_input() && !o.inputs.empty()) {
      throw GraphError("input op '" + o.name + "' must not read other ops");
    }
    if (!o.is_input() && o.inputs.empty()) {
      throw GraphError("op '" + o.name + "' (" + o.kind + ") reads nothing; only input ops may");
    }
    for (size_t i = 0; i < o.inputs.size(); ++i) {
      const Op& p = op(o.inputs[i].producer);
      if (p.output != o.inputs[i].expected) {
        throw GraphError("edge '" + p.name + "' -> '" + o.name + "' (input " + std::to_string(i) +
                         "): producer gives " + to_string(p.output) + " but consumer expects " +
                         to_string(o.inputs[i].expected));
      }
    }
    if (o.kind == "aten") parse_aten_program(*this, o);  // See Note [ATen programs]: checked where it enters
    if (id != sink && consumers_[id].empty()) {
      throw GraphError("op '" + o.name + "' has no consumers; only the loss '" + ops_[sink].name +
                       "' may be a sink");
    }
  }
  if (!consumers_[sink].empty()) {
    throw GraphError("loss op '" + ops_[sink].name + "' must be the sink but has consumers");
  }
}

bool OpGraph::is_convex(const std::set<OpId>& subset) const {
  // Walk forward from the subset's outside consumers; reaching the subset
  // again means a path leaves and re-enters it.
  std::vector<char> seen(size(), 0);
  std::vector<OpId> stack;
  for (OpId id : subset) {
    for (OpId c : consumers(id)) {
      if (!subset.count(c) && !seen[c]) {
        seen[c] = 1;
        stack.push_back(c);
      }
    }
  }
  while (!stack.empty()) {
    OpId id = stack.back();
    stack.pop_back();
    for (OpId c : consumers_[id]) {
      if (subset.count(c)) return false;
      if (!seen[c]) {
        seen[c] = 1;
        stack.push_back(c);
      }
    }
  }
  return true;
}

std::vector<bool> OpGraph::carries_gradients() const {
  std::vector<bool> carries(ops_.size(), false);
  for (std::size_t id = 0; id < ops_.size(); ++id) {  // producers come first
    carries[id] = !ops_[id].params.empty();
    for (const auto& in : ops_[id].inputs) carries[id] = carries[id] || carries[in.producer];
  }
  return carries;
}

std::int64_t OpGraph::param_bytes() const {
  std::vector<OpId> all(ops_.size());
  for (std::size_t id = 0; id < ops_.size(); ++id) all[id] = static_cast<OpId>(id);
  return param_bytes_of(all);
}

std::int64_t OpGraph::param_bytes_of(const std::vector<OpId>& ops) const {
  std::set<std::string> seen;
  std::int64_t n = 0;
  for (auto id : ops)
    for (const auto& p : ops_.at(id).params)
      if (seen.insert(p.name).second) n += p.bytes();
  return n;
}

std::int64_t OpGraph::input_bytes() const {
  std::int64_t n = 0;
  for (const auto& o : ops_)
    if (o.is_input()) n += o.output.bytes();
  return n;
}

double OpGraph::forward_flops() const {
  double n = 0;
  for (const auto& o : ops_) n += o.forward_flops;
  return n;
}

}  // namespace trident::graph
