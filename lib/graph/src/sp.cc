// See sp.h for the definitions of series and parallel composition.
#include "trident/graph/sp.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>

namespace trident::graph {
namespace {

// Descendants of every op as bitsets (an op does not reach itself).
class Reach {
 public:
  explicit Reach(const OpGraph& g) : words_((g.size() + 63) / 64), bits_(g.size() * words_, 0) {
    for (OpId v = g.size() - 1; v >= 0; --v) {
      for (OpId c : g.consumers(v)) {
        set(v, c);
        for (int w = 0; w < words_; ++w) bits_[v * words_ + w] |= bits_[c * words_ + w];
      }
    }
  }
  bool operator()(OpId from, OpId to) const { return bits_[from * words_ + to / 64] >> (to % 64) & 1; }

 private:
  void set(OpId from, OpId to) { bits_[from * words_ + to / 64] |= std::uint64_t{1} << (to % 64); }
  int words_;
  std::vector<std::uint64_t> bits_;
};

class Decomposer {
 public:
  Decomposer(const OpGraph& g, SpDecomposition& out) : g_(g), reach_(g), out_(out) {}

  // `ops` ascending, which is a topological order (see op_graph.h).
  SpNode decompose(const std::vector<OpId>& ops) {
    if (ops.size() == 1) return SpNode::leaf(ops[0]);
    auto comps = components(ops);
    if (comps.size() > 1) {
      SpNode node{SpNode::Kind::kParallel};
      for (const auto& c : comps) node.children.push_back(decompose(c));
      return node;
    }
    auto cuts = series_cuts(ops);
    if (cuts.empty()) cuts.push_back(spize(ops));
    SpNode node{SpNode::Kind::kSeries};
    std::size_t begin = 0;
    cuts.push_back(ops.size());
    for (std::size_t cut : cuts) {
      SpNode child = decompose(std::vector<OpId>(ops.begin() + begin, ops.begin() + cut));
      if (child.kind == SpNode::Kind::kSeries) {
        for (auto& c : child.children) node.children.push_back(std::move(c));
      } else {
        node.children.push_back(std::move(child));
      }
      begin = cut;
    }
    return node;
  }

 private:
  // Weakly connected components of the induced subgraph, each ascending,
  // ordered by their smallest op.
  std::vector<std::vector<OpId>> components(const std::vector<OpId>& ops) const {
    std::vector<int> parent(ops.size());
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      for (OpId c : g_.consumers(ops[i])) {
        auto it = std::lower_bound(ops.begin(), ops.end(), c);
        if (it != ops.end() && *it == c) parent[find(static_cast<int>(i))] = find(static_cast<int>(it - ops.begin()));
      }
    }
    std::vector<std::vector<OpId>> comps;
    std::vector<int> index(ops.size(), -1);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      int root = find(static_cast<int>(i));
      if (index[root] < 0) index[root] = static_cast<int>(comps.size()), comps.emplace_back();
      comps[index[root]].push_back(ops[i]);
    }
    return comps;
  }

  // Prefix sizes k at which every op of ops[0..k) reaches every op of
  // ops[k..n). Such a prefix is a prefix of every topological order, so
  // checking the prefixes of one order finds them all.
  std::vector<std::size_t> series_cuts(const std::vector<OpId>& ops) const {
    const std::size_t n = ops.size();
    std::vector<std::size_t> cuts;
    std::size_t last_unreached = 0;
    for (std::size_t k = 1; k < n; ++k) {
      const std::size_t i = k - 1;
      std::size_t last = i;
      for (std::size_t q = n; q-- > i + 1;) {
        if (!reach_(ops[i], ops[q])) {
          last = q;
          break;
        }
      }
      last_unreached = std::max(last_unreached, last);
      if (last_unreached <= i) cuts.push_back(k);
    }
    return cuts;
  }

  // The prefix cut that needs the fewest added sink→source edges (ties: the
  // most balanced); records those edges.
  std::size_t spize(const std::vector<OpId>& ops) {
    const std::size_t n = ops.size();
    std::size_t best_k = 1;
    std::vector<std::pair<OpId, OpId>> best;
    bool have = false;
    for (std::size_t k = 1; k < n; ++k) {
      std::vector<OpId> sinks, sources;
      for (std::size_t i = 0; i < k; ++i) {
        bool inner = false;
        for (OpId c : g_.consumers(ops[i])) inner |= c <= ops[k - 1] && std::binary_search(ops.begin(), ops.begin() + k, c);
        if (!inner) sinks.push_back(ops[i]);
      }
      for (std::size_t j = k; j < n; ++j) {
        bool inner = false;
        for (const auto& in : g_.op(ops[j]).inputs) inner |= std::binary_search(ops.begin() + k, ops.end(), in.producer);
        if (!inner) sources.push_back(ops[j]);
      }
      std::vector<std::pair<OpId, OpId>> added;
      for (OpId a : sinks)
        for (OpId b : sources)
          if (!reach_(a, b)) added.emplace_back(a, b);
      auto imbalance = [n](std::size_t k) { return std::abs(2 * static_cast<long>(k) - static_cast<long>(n)); };
      if (!have || added.size() < best.size() || (added.size() == best.size() && imbalance(k) < imbalance(best_k))) {
        have = true, best_k = k, best = std::move(added);
      }
    }
    out_.added_edges.insert(out_.added_edges.end(), best.begin(), best.end());
    return best_k;
  }

  const OpGraph& g_;
  Reach reach_;
  SpDecomposition& out_;
};

void collect(const SpNode& node, std::vector<OpId>& out) {
  if (node.kind == SpNode::Kind::kLeaf) out.push_back(node.op);
  for (const auto& c : node.children) collect(c, out);
}

}  // namespace

bool SpNode::is_chain() const {
  return kind == Kind::kLeaf ||
         (kind == Kind::kSeries &&
          std::all_of(children.begin(), children.end(), [](const SpNode& c) { return c.kind == Kind::kLeaf; }));
}

SpNode SpNode::leaf(OpId op) {
  SpNode n;
  n.op = op;
  return n;
}

std::vector<OpId> SpNode::ops() const {
  std::vector<OpId> out;
  collect(*this, out);
  std::sort(out.begin(), out.end());
  return out;
}

SpDecomposition sp_decompose(const OpGraph& graph, bool skip_inputs) {
  std::vector<OpId> all;
  for (OpId id = 0; id < graph.size(); ++id)
    if (!skip_inputs || !graph.op(id).is_input()) all.push_back(id);
  if (all.empty()) throw GraphError("sp_decompose: graph '" + graph.name() + "' has no ops to decompose");
  SpDecomposition out;
  out.root = Decomposer(graph, out).decompose(all);
  std::sort(out.added_edges.begin(), out.added_edges.end());
  return out;
}

SpDecomposition linearize(const OpGraph& graph, bool skip_inputs) {
  std::vector<OpId> order;
  for (OpId id : graph.topo_order())
    if (!skip_inputs || !graph.op(id).is_input()) order.push_back(id);
  if (order.empty()) throw GraphError("linearize: graph '" + graph.name() + "' has no ops");
  SpDecomposition out;
  if (order.size() == 1) {
    out.root = SpNode::leaf(order[0]);
    return out;
  }
  out.root.kind = SpNode::Kind::kSeries;
  for (std::size_t i = 0; i < order.size(); ++i) {
    out.root.children.push_back(SpNode::leaf(order[i]));
    if (i == 0) continue;
    const auto& cons = graph.consumers(order[i - 1]);
    if (std::find(cons.begin(), cons.end(), order[i]) == cons.end()) out.added_edges.emplace_back(order[i - 1], order[i]);
  }
  return out;
}

std::string to_string(const SpNode& node) {
  if (node.kind == SpNode::Kind::kLeaf) return std::to_string(node.op);
  std::string s = node.kind == SpNode::Kind::kSeries ? "S(" : "P(";
  for (std::size_t i = 0; i < node.children.size(); ++i) s += (i ? "," : "") + to_string(node.children[i]);
  return s + ")";
}

}  // namespace trident::graph
