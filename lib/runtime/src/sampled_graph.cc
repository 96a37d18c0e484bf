// See sampled_graph.h and Note [Sampled blocks] in nn/sampled_blocks.h.
#include "sampled_graph.h"

#include <chrono>
#include <fstream>

#include "trident/base/test_hooks.h"
#include "trident/data/dataset.h"
#include "trident/gnn/graph_data.h"

namespace trident::runtime {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::vector<std::int64_t> ids_of(const torch::Tensor& nodes) {
  const auto t = nodes.to(torch::kCPU, torch::kInt64).contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

// The nodes `mask` marks, with their labels, as a dataset of seeds.
data::Dataset seeds_of(const gnn::GraphData& g, const std::vector<std::uint8_t>& mask, const std::string& split) {
  std::vector<std::int64_t> ids, labels;
  for (std::int64_t v = 0; v < g.nodes; ++v)
    if (mask[static_cast<std::size_t>(v)]) ids.push_back(v), labels.push_back(g.labels[static_cast<std::size_t>(v)]);
  data::Dataset d;
  d.name = "graph " + g.name + " (" + split + " seed nodes)";
  d.num_classes = g.classes;
  d.fields["node"] = torch::tensor(ids, torch::kInt64);
  d.fields["label"] = torch::tensor(labels, torch::kInt64);
  return d;
}

}  // namespace

bool SampledGraph::applies(const graph::OpGraph& model) {
  for (const auto& op : model.ops())
    if (op.kind == "block_features") return true;
  return false;
}

SampledGraph::SampledGraph(const config::TrainConfig& c, const graph::OpGraph& model, int threads)
    : config_(c), threads_(std::max(1, threads)) {
  for (const auto& op : model.ops()) {
    if (op.kind == "block_aggregate") norm_ = op.attrs.value("norm", std::string("mean"));
    if (op.kind == "block_attention") norm_ = "edges";
  }
  graph_ = gnn::load_graph(c.model.graph.empty() ? "csbm" : c.model.graph, /*with_features=*/true);
  csr_ = gnn::in_neighbours(graph_);
  for (std::int64_t v = 0; v < csr_.nodes(); ++v) degrees_.push_back(csr_.degree(v));
  options_.fanouts = c.model.fanouts;
  options_.replace = c.model.sample_replace;
  options_.seed = static_cast<std::uint64_t>(c.train.seed);
  options_.threads = 1;  // a step ahead, on its own thread
  whole_ = torch::from_blob(graph_.x.data(), {graph_.nodes, graph_.features}, torch::kFloat32);
  if (const auto dir = test_hooks::sample_log_dir(); !dir.empty()) tree_log_ = dir;  // See Note [Test hooks]
}

SampledGraph::~SampledGraph() {
  for (auto& a : ahead_) a.batch.wait();
}

data::Sources SampledGraph::seeds() const {
  const auto eval = config_.data.eval == "val" ? graph_.val : graph_.test;
  return data::in_memory({seeds_of(graph_, graph_.train, "train"), seeds_of(graph_, eval, config_.data.eval)});
}

void SampledGraph::shard(comm::Group group) {
  rank_ = group.world_rank();
  const auto bounds = gnn::even_bounds(graph_.nodes, group.size());
  const auto lo = bounds[static_cast<std::size_t>(group.rank())], hi = bounds[static_cast<std::size_t>(group.rank()) + 1];
  auto mine = whole_.narrow(0, lo, hi - lo).clone();
  whole_ = torch::Tensor();
  std::vector<float>().swap(graph_.x);  // only this rank's rows stay
  store_ = std::make_unique<sync::RowStore>(std::move(group), bounds, std::move(mine));
}

gnn::SampleOptions SampledGraph::options_at(std::int64_t epoch, bool training) const {
  auto o = options_;
  o.epoch = epoch;
  if (!training) o.fanouts.assign(o.fanouts.size(), -1);  // evaluation: every neighbour, the full graph's outputs
  return o;
}

void SampledGraph::set_step(std::int64_t step, std::int64_t epoch) {
  step_ = step, epoch_ = epoch;
  for (auto it = ahead_.begin(); it != ahead_.end();)
    if (it->step < step) it->batch.wait(), it = ahead_.erase(it);
    else ++it;
}

void SampledGraph::prefetch(std::int64_t step, std::vector<torch::Tensor> nodes, std::int64_t epoch) {
  for (const auto& n : nodes) {
    Ahead a{ids_of(n), step, epoch, {}};
    a.batch = std::async(std::launch::async, [this, ids = a.nodes, o = options_at(epoch, true)] {
                return gnn::sample_blocks(csr_, ids, o);
              }).share();
    ahead_.push_back(std::move(a));
  }
}

std::shared_ptr<const nn::SampledBlocks> SampledGraph::blocks(const torch::Tensor& nodes, bool training) {
  const auto ids = ids_of(nodes);
  auto start = std::chrono::steady_clock::now();
  gnn::SampledBatch batch;
  bool found = false;
  if (training)
    for (auto& a : ahead_)
      if (a.step == step_ && a.epoch == epoch_ && a.nodes == ids) {
        batch = a.batch.get(), found = true;
        break;
      }
  if (!found) {
    auto o = options_at(epoch_, training);
    o.threads = threads_;
    batch = gnn::sample_blocks(csr_, ids, o);
  }
  const double sample_s = seconds_since(start);
  if (!tree_log_.empty() && training) log_trees(batch);
  start = std::chrono::steady_clock::now();
  auto rows = store_->pull(torch::tensor(batch.input_nodes(), torch::kInt64));
  const auto pulled = store_->take_stats();
  if (training) {  // the metrics are training's (evaluation pulls every neighbour)
    stats_.sample_s += sample_s, stats_.fetch_s += seconds_since(start);
    stats_.rows += pulled;
    ++stats_.batches;
  }
  return nn::make_blocks(batch, norm_, degrees_, std::move(rows));
}

SampledGraph::Stats SampledGraph::take_stats() {
  auto s = stats_;
  stats_ = {};
  return s;
}

// See Note [Test hooks]: TRIDENT_TEST_SAMPLE_LOG, "epoch seed tree-hash" per seed trained.
void SampledGraph::log_trees(const gnn::SampledBatch& batch) const {
  const auto hashes = gnn::seed_tree_hashes(batch);
  std::string lines;
  for (std::size_t i = 0; i < hashes.size(); ++i)
    lines += std::to_string(epoch_) + " " + std::to_string(batch.seeds[i]) + " " + std::to_string(hashes[i]) + "\n";
  std::ofstream(tree_log_ + "/trees.rank" + std::to_string(rank_) + ".txt", std::ios::app) << lines;
}

}  // namespace trident::runtime
