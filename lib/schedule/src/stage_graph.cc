#include "trident/schedule/stage_graph.h"

#include <algorithm>
#include <queue>

namespace trident::schedule {

namespace {

// X(k) of Note [Shared cores].
double node_throughput(const StageGraph& g, int threads) {
  if (g.core_throughput.empty()) return std::min(threads, g.cores_per_node);
  const auto k = std::min<std::size_t>(static_cast<std::size_t>(threads), g.core_throughput.size());
  return g.core_throughput[k - 1];
}

}  // namespace

double StageGraph::speed(int busy, int own) const {
  if (cores_per_node <= 0 || busy <= own) return 1.0;
  return std::min(1.0, node_throughput(*this, busy) * own / (busy * node_throughput(*this, own)));
}

bool StageGraph::oversubscribed() const {
  if (cores_per_node <= 0) return false;
  std::vector<int> threads;
  for (const auto& st : stages)
    for (int r = 0; r < st.replicas; ++r) {
      const int node = r < static_cast<int>(st.nodes.size()) ? st.nodes[r] : 0;
      if (node >= static_cast<int>(threads.size())) threads.resize(node + 1, 0);
      threads[node] += st.threads;
    }
  for (const auto& st : stages)
    for (int t : threads)
      if (speed(t, st.threads) < 1.0) return true;
  return false;
}

std::vector<std::vector<StageId>> StageGraph::predecessors() const {
  std::vector<std::vector<StageId>> out(stages.size());
  for (const auto& e : edges) out[e.to].push_back(e.from);
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

std::vector<std::vector<StageId>> StageGraph::successors() const {
  std::vector<std::vector<StageId>> out(stages.size());
  for (const auto& e : edges) out[e.from].push_back(e.to);
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

std::vector<StageId> StageGraph::topo_order() const {
  std::vector<int> indegree(stages.size(), 0);
  for (const auto& e : edges) ++indegree[e.to];
  std::priority_queue<StageId, std::vector<StageId>, std::greater<>> ready;
  for (StageId s = 0; s < size(); ++s)
    if (!indegree[s]) ready.push(s);
  const auto succ = successors();
  std::vector<StageId> order;
  while (!ready.empty()) {
    StageId s = ready.top();
    ready.pop();
    order.push_back(s);
    for (StageId t : succ[s])
      if (--indegree[t] == 0) ready.push(t);
  }
  return order;
}

std::vector<int> StageGraph::heights() const {
  const auto order = topo_order();
  const auto succ = successors();
  std::vector<int> h(stages.size(), 1);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (StageId t : succ[*it]) h[*it] = std::max(h[*it], h[t] + 1);
  return h;
}

int StageGraph::depth() const {
  const auto h = heights();
  return h.empty() ? 0 : *std::max_element(h.begin(), h.end());
}

void StageGraph::check() const {
  if (stages.empty()) throw ScheduleError("stage graph has no stages");
  for (const auto& e : edges) {
    if (e.from < 0 || e.from >= size() || e.to < 0 || e.to >= size())
      throw ScheduleError("stage edge " + std::to_string(e.from) + " -> " + std::to_string(e.to) +
                          " names a stage outside 0.." + std::to_string(size() - 1));
    if (e.from == e.to) throw ScheduleError("stage edge " + std::to_string(e.from) + " -> itself");
  }
  if (static_cast<int>(topo_order().size()) != size())
    throw ScheduleError("stage graph has a cycle: the stages' dependencies must form a DAG");
}

}  // namespace trident::schedule
