// See Note [Weight pass] in executor/stage_executor.h.
#include "weight_pass.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace trident::executor {

namespace {

using torch::autograd::Edge;
using torch::autograd::Node;
// How autograd holds a node (c10::intrusive_ptr in LibTorch 2.x), taken from
// Edge itself, so every pointer below is the one the graph stores.
using NodePtr = decltype(Edge::function);

// A set of parameters by index.
class Bits {
 public:
  explicit Bits(std::size_t n = 0) : words_((n + 63) / 64, 0) {}
  void set(std::size_t i) { words_[i / 64] |= std::uint64_t{1} << (i % 64); }
  bool test(std::size_t i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  Bits& operator|=(const Bits& o) {
    for (std::size_t w = 0; w < words_.size(); ++w) words_[w] |= o.words_[w];
    return *this;
  }
  bool any() const {
    return std::any_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w != 0; });
  }

 private:
  std::vector<std::uint64_t> words_;
};

// Records the gradients a node receives, then passes them on unchanged.
struct Capture final : torch::autograd::FunctionPreHook {
  std::vector<torch::Tensor> grads;
  bool fired = false;
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& in) override {
    grads = in, fired = true;
    return in;
  }
};

// What the walk learns of one node: whether it leads to an input (the input
// side), which parameters it leads to, and its children.
struct NodeInfo {
  NodePtr node;
  bool to_input = false;
  Bits params;
  std::vector<std::size_t> children;
};

// Every node reachable from the roots, children before parents.
std::vector<NodeInfo> walk(const std::vector<NodePtr>& roots,
                           const std::unordered_set<const Node*>& inputs,
                           const std::unordered_map<const Node*, std::size_t>& params,
                           std::unordered_map<const Node*, std::size_t>& index) {
  std::vector<NodeInfo> info;
  std::vector<std::pair<NodePtr, std::size_t>> stack;
  auto enter = [&](const NodePtr& n) {
    if (!n || index.count(n.get())) return;
    index[n.get()] = static_cast<std::size_t>(-1);  // on the stack
    stack.emplace_back(n, 0);
  };
  for (const auto& r : roots) {
    enter(r);
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->num_outputs()) {
        const auto child = n->next_edge(next++).function;
        enter(child);
        continue;
      }
      NodeInfo ni;
      ni.node = n;
      ni.params = Bits(params.size());
      ni.to_input = inputs.count(n.get()) > 0;
      if (auto p = params.find(n.get()); p != params.end()) ni.params.set(p->second);
      for (const auto& e : n->next_edges()) {
        if (!e.is_valid()) continue;
        const auto c = index.at(e.function.get());
        ni.children.push_back(c);
        ni.to_input = ni.to_input || info[c].to_input;
        ni.params |= info[c].params;
      }
      index[n.get()] = info.size();
      info.push_back(std::move(ni));
      stack.pop_back();
    }
  }
  return info;
}

std::size_t find(std::vector<std::size_t>& parent, std::size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// An intermediate: a node of the input side that reaches parameters past it.
struct Found {
  std::size_t node;
  Bits side, inside;                       // parameters past the input side, and through it
  std::size_t first = 0;                   // a parameter of its side, naming its group
  std::vector<std::uint32_t> input_edges;  // its edges into the input side
};

std::vector<Found> intermediates_of(const std::vector<NodeInfo>& info,
                                    const std::unordered_map<const Node*, std::size_t>& index, std::size_t n) {
  std::vector<Found> found;
  for (std::size_t i = 0; i < info.size(); ++i) {
    if (!info[i].to_input) continue;
    Found f{i, Bits(n), Bits(n)};
    const auto& edges = info[i].node->next_edges();
    for (std::uint32_t e = 0; e < edges.size(); ++e) {
      if (!edges[e].is_valid()) continue;
      const auto& child = info[index.at(edges[e].function.get())];
      if (child.to_input) f.input_edges.push_back(e);
      (child.to_input ? f.inside : f.side) |= child.params;
    }
    if (f.side.any()) found.push_back(std::move(f));
  }
  return found;
}

// Parameters sharing an intermediate (or a node below one) in one set;
// `reached`: the parameters some intermediate reaches.
std::vector<std::size_t> unite(std::vector<Found>& found, std::size_t n, std::vector<bool>& reached) {
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  reached.assign(n, false);
  for (auto& f : found) {
    f.first = n;
    for (std::size_t p = 0; p < n; ++p) {
      if (!f.side.test(p)) continue;
      reached[p] = true;
      if (f.first == n) f.first = p;
      parent[find(parent, p)] = find(parent, f.first);
    }
  }
  return parent;
}

}  // namespace

struct WeightPass::State {
  struct Intermediate {
    NodePtr node;
    Capture* hook = nullptr;  // owned by the node while hooked
    std::size_t group = 0;
    std::vector<std::uint32_t> input_edges;  // cut while W runs
  };
  std::vector<torch::Tensor> params;
  std::vector<Intermediate> intermediates;
  std::vector<std::vector<std::size_t>> groups;  // parameter indices of each clean group
  std::vector<std::size_t> fallback;             // parameters of the second pass
  std::vector<std::unique_ptr<Capture>> unhooked;  // the hooks, once taken off their nodes
};

WeightPass::WeightPass(const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& inputs,
                       const std::vector<torch::Tensor>& params)
    : s_(std::make_unique<State>()) {
  namespace impl = torch::autograd::impl;
  std::unordered_map<const Node*, std::size_t> param_of;
  for (const auto& p : params) {
    param_of[impl::grad_accumulator(p).get()] = s_->params.size();
    s_->params.push_back(p);
  }
  std::unordered_set<const Node*> input_nodes;
  for (const auto& t : inputs) input_nodes.insert(impl::gradient_edge(t).function.get());
  std::vector<NodePtr> root_nodes;
  for (const auto& r : roots) root_nodes.push_back(impl::gradient_edge(r).function);
  std::unordered_map<const Node*, std::size_t> index;
  const auto info = walk(root_nodes, input_nodes, param_of, index);

  const std::size_t n = params.size();
  Bits fallback(n);  // reached from a root outside the input side
  for (const auto& r : root_nodes)
    if (r && !info[index.at(r.get())].to_input) fallback |= info[index.at(r.get())].params;
  auto found = intermediates_of(info, index, n);
  std::vector<bool> reached;
  auto parent = unite(found, n, reached);
  // A group is clean unless a root reaches it past the input side or one
  // of its intermediates reaches it through the input side too.
  auto group_of = [&](const Found& f) { return find(parent, f.first); };
  std::vector<bool> bad(n, false);
  for (std::size_t p = 0; p < n; ++p)
    if (fallback.test(p)) bad[find(parent, p)] = true;
  for (const auto& f : found) {
    const auto g = group_of(f);
    for (std::size_t p = 0; p < n && !bad[g]; ++p)
      if (f.inside.test(p) && find(parent, p) == g) bad[g] = true;
  }
  std::unordered_map<std::size_t, std::size_t> group_of_root;
  for (std::size_t p = 0; p < n; ++p) {
    const auto root = find(parent, p);
    if (bad[root]) {
      s_->fallback.push_back(p);
      continue;
    }
    if (!reached[p]) continue;  // no gradient reaches it
    auto [it, fresh] = group_of_root.emplace(root, s_->groups.size());
    if (fresh) s_->groups.emplace_back();
    s_->groups[it->second].push_back(p);
  }
  for (const auto& f : found) {
    const auto root = group_of(f);
    if (bad[root]) continue;
    auto hook = std::make_unique<Capture>();
    State::Intermediate x{info[f.node].node, hook.get(), group_of_root.at(root), f.input_edges};
    x.node->add_pre_hook(std::move(hook));
    s_->intermediates.push_back(std::move(x));
  }
}

WeightPass::~WeightPass() { unhook(); }

void WeightPass::unhook() {
  for (auto& x : s_->intermediates) {
    if (!x.hook) continue;
    auto& hooks = x.node->pre_hooks();
    for (auto it = hooks.begin(); it != hooks.end(); ++it) {
      if (it->get() != x.hook) continue;
      s_->unhooked.emplace_back(static_cast<Capture*>(it->release()));
      hooks.erase(it);
      break;
    }
  }
}

// The parameters of groups whose hooks all fired go in one autograd call
// from the intermediates, their edges into the input side cut for its
// length: the engine then walks and runs the weights-only part alone (an
// intermediate computes no input gradient, and its call does not walk the
// graph below it: per-group calls did, W growing with the square of the
// stage's depth). The rest, the second pass, runs first, on the whole graph.
void WeightPass::run(const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& grads) {
  unhook();
  namespace impl = torch::autograd::impl;
  std::vector<bool> complete(s_->groups.size(), true);
  for (const auto& x : s_->intermediates) complete[x.group] = complete[x.group] && x.hook->fired;
  std::vector<std::size_t> fallback = s_->fallback;
  for (std::size_t g = 0; g < s_->groups.size(); ++g)
    if (!complete[g]) fallback.insert(fallback.end(), s_->groups[g].begin(), s_->groups[g].end());
  std::sort(fallback.begin(), fallback.end());
  std::vector<torch::Tensor> targets;
  for (auto p : fallback) targets.push_back(s_->params[p]);
  if (!targets.empty() && !roots.empty())
    torch::autograd::backward(roots, grads, /*retain_graph=*/true, /*create_graph=*/false, targets);

  torch::autograd::edge_list from, to;
  torch::autograd::variable_list given;
  std::vector<std::pair<Node*, std::pair<std::uint32_t, Edge>>> cut;
  for (const auto& x : s_->intermediates) {
    if (!complete[x.group]) continue;
    for (std::size_t i = 0; i < x.hook->grads.size(); ++i)
      if (x.hook->grads[i].defined())
        from.emplace_back(x.node, static_cast<std::uint32_t>(i)), given.push_back(x.hook->grads[i]);
    for (auto e : x.input_edges) {
      cut.push_back({x.node.get(), {e, x.node->next_edge(e)}});
      x.node->next_edges()[e] = Edge();
    }
  }
  for (std::size_t g = 0; g < s_->groups.size(); ++g)
    if (complete[g])
      for (auto p : s_->groups[g]) to.push_back(impl::gradient_edge(s_->params[p]));
  auto restore = [&] {
    for (auto& [node, edge] : cut) node->next_edges()[edge.first] = edge.second;
  };
  try {
    if (!from.empty())
      torch::autograd::Engine::get_default_engine().execute(from, given, /*keep_graph=*/true, /*create_graph=*/false,
                                                            /*accumulate_grad=*/true, to);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

int WeightPass::deferred_params() const {
  int k = 0;
  for (const auto& g : s_->groups) k += static_cast<int>(g.size());
  return k;
}

int WeightPass::fallback_params() const { return static_cast<int>(s_->fallback.size()); }

}  // namespace trident::executor
