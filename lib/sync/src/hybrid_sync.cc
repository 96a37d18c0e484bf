// Per-parameter methods (HybComm), each on its own subgroup (grad_sync.h).
#include "trident/sync/grad_sync.h"

#include "trident/cost/network.h"

namespace trident::sync {
namespace {

class HybridSync final : public GradSync {
 public:
  explicit HybridSync(std::vector<std::unique_ptr<GradSync>> parts) : parts_(std::move(parts)) {}

  void arm() override {
    for (auto& p : parts_) p->arm();
  }
  void finish() override {
    for (auto& p : parts_) p->finish();
    merge();
  }
  void set_update(const Update& update) override {
    for (auto& p : parts_) p->set_update(update);
  }
  void apply(const Update& update) override {
    for (auto& p : parts_) p->apply(update);
    merge();
  }
  OpObserver observer() override {
    std::vector<OpObserver> all;
    for (auto& p : parts_)
      if (auto o = p->observer()) all.push_back(std::move(o));
    if (all.empty()) return {};
    return [all](graph::OpId id, const std::vector<torch::Tensor>& in, const torch::Tensor& out) {
      for (const auto& o : all) o(id, in, out);
    };
  }
  void flush() override {
    for (auto& p : parts_) p->flush();
  }
  double grad_square_sum() override {
    double sum = 0;
    for (auto& p : parts_) sum += p->grad_square_sum();
    return sum;
  }
  const SyncStats& stats() const override { return stats_; }
  std::string name() const override { return "hybrid"; }
  std::optional<Span> shard(const std::string& name) const override {
    for (const auto& p : parts_)
      if (auto s = p->shard(name)) return s;
    return std::nullopt;
  }
  OpGate gate() override {
    std::vector<OpGate> all;
    for (auto& p : parts_)
      if (auto g = p->gate()) all.push_back(std::move(g));
    if (all.empty()) return {};
    if (all.size() == 1) return all.front();
    return [all](graph::OpId id) {
      for (const auto& g : all) g(id);
    };
  }
  void next_forwards(bool next) override {
    for (auto& p : parts_) p->next_forwards(next);
  }

 private:
  void merge() {
    stats_ = SyncStats{};
    for (const auto& p : parts_) {
      const auto& s = p->stats();
      stats_.sent.insert(s.sent.begin(), s.sent.end());
      stats_.received.insert(s.received.begin(), s.received.end());
      stats_.events.insert(stats_.events.end(), s.events.begin(), s.events.end());
      stats_.backward_end_s = std::max(stats_.backward_end_s, s.backward_end_s);
      stats_.exposed_s = std::max(stats_.exposed_s, s.exposed_s);
      stats_.read_staleness = std::max(stats_.read_staleness, s.read_staleness);  // only the PS part reads stale
      stats_.buffer_bytes += s.buffer_bytes;
    }
  }
  std::vector<std::unique_ptr<GradSync>> parts_;
  SyncStats stats_;
};

}  // namespace

std::unique_ptr<GradSync> make_hybrid_sync(comm::Group group, NamedParams params, const graph::OpGraph& graph,
                                           const std::map<std::string, std::string>& methods,
                                           std::int64_t bucket_bytes, int staleness, torch::ScalarType ps_push_dtype,
                                           std::vector<std::int64_t> shares) {
  std::map<std::string, NamedParams> split;
  for (auto& [name, t] : params) {
    auto it = methods.find(name);
    const auto m = it == methods.end() ? cost::SyncMethod::kAllReduce : cost::sync_method_from_string(it->second);
    split[cost::to_string(m)].emplace_back(name, t);
  }
  std::vector<int> all(group.size());
  for (int r = 0; r < group.size(); ++r) all[r] = r;
  std::vector<std::unique_ptr<GradSync>> parts;
  // Fixed order, so every rank creates the same subgroups.
  for (const auto& m : cost::sync_method_names()) {
    auto it = split.find(m);
    if (it == split.end()) continue;
    comm::Group sub = group.subgroup(all, "hybrid-" + m);
    if (it->first == "allreduce") parts.push_back(make_allreduce_sync(sub, it->second, bucket_bytes));
    if (it->first == "ps") parts.push_back(make_ps_sync(sub, it->second, {staleness, bucket_bytes, &graph, ps_push_dtype, 4 * bucket_bytes}));
    if (it->first == "sfb") parts.push_back(make_sfb_sync(sub, it->second, graph, shares));
  }
  return std::make_unique<HybridSync>(std::move(parts));
}

}  // namespace trident::sync
