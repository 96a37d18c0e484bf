// See sampled_graph.h and Note [Sampled blocks] in nn/sampled_blocks.h.
#include "sampled_graph.h"

#include <algorithm>
#include <chrono>
#include <fstream>

#include "trident/base/keyed_random.h"
#include "trident/base/test_hooks.h"
#include "trident/checkpoint/spans.h"
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
    if (op.kind == "block_features") embedding_dim_ = op.attrs.value("embedding", std::int64_t{0});
  }
  graph_ = gnn::load_graph(c.model.graph.empty() ? "csbm" : c.model.graph, /*with_features=*/true);
  csr_ = gnn::in_neighbours(graph_);
  std::vector<std::int64_t>().swap(graph_.src);  // the CSR holds the structure now
  std::vector<std::int64_t>().swap(graph_.dst);
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
  rank_in_group_ = group.rank();
  const auto bounds = gnn::even_bounds(graph_.nodes, group.size());
  const auto lo = bounds[static_cast<std::size_t>(group.rank())], hi = bounds[static_cast<std::size_t>(group.rank()) + 1];
  auto mine = whole_.narrow(0, lo, hi - lo).clone();
  whole_ = torch::Tensor();
  std::vector<float>().swap(graph_.x);  // only this rank's rows stay
  if (embedding_dim_ > 0) {  // See Note [Sparse Adagrad]: rows start uniform in [-1, 1), keyed by (seed, node)
    auto rows = torch::empty({hi - lo, embedding_dim_}, torch::kFloat32);
    auto* w = rows.data_ptr<float>();
    for (auto v = lo; v < hi; ++v) {
      KeyedRandom random({options_.seed, 0xe3bedd1aULL, static_cast<std::uint64_t>(v)});
      for (std::int64_t j = 0; j < embedding_dim_; ++j) w[(v - lo) * embedding_dim_ + j] = static_cast<float>(random.uniform(-1, 1));
    }
    embedding_ = std::make_unique<sync::RowStore>(group, bounds, rows);
    adagrad_ = std::make_unique<optim::SparseAdagrad>(embedding_->shard());  // updates the store's rows in place
  }
  store_ = std::make_unique<sync::RowStore>(std::move(group), bounds, std::move(mine));
}

void SampledGraph::update_embeddings(double lr) {
  if (!embedding_) return;
  std::vector<torch::Tensor> ids, grads;
  for (const auto& [nodes, leaf] : pulled_) {
    ids.push_back(nodes);
    grads.push_back(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf));
  }
  pulled_.clear();
  const auto all = ids.empty() ? torch::empty({0}, torch::kInt64) : torch::cat(ids);
  const auto g = grads.empty() ? torch::empty({0, embedding_dim_}) : torch::cat(grads);
  const auto pushed = embedding_->push(all, g);
  adagrad_->step(pushed.rows, pushed.sums, lr);
}

checkpoint::NamedTensors SampledGraph::embedding_entries() const {
  if (!embedding_) return {};
  const auto at = "@" + std::to_string(embedding_->bounds()[static_cast<std::size_t>(rank_in_group_)] * embedding_dim_);
  return {{"embedding/node" + at, embedding_->shard().reshape({-1})}, {"embedding/adagrad" + at, adagrad_->state().reshape({-1})}};
}

namespace {

// A table written as flat spans KEY@OFFSET by any number of ranks, whole.
torch::Tensor whole_of(const checkpoint::CheckpointReader& ck, const std::string& key, std::int64_t numel) {
  auto whole = checkpoint::read_spans(ck, key);
  if (whole.numel() != numel)
    throw checkpoint::CheckpointError("--resume " + ck.path() + ": the checkpoint's " + key + " holds " +
                                      std::to_string(whole.numel()) + " of the " + std::to_string(numel) +
                                      " values the node embedding needs (model.node_embedding or the graph changed?)");
  return whole;
}

}  // namespace

void SampledGraph::load_embeddings(const checkpoint::CheckpointReader& ck) {
  if (!embedding_) return;
  torch::NoGradGuard no_grad;
  const auto n = embedding_->rows() * embedding_dim_;
  const auto lo = embedding_->bounds()[static_cast<std::size_t>(rank_in_group_)] * embedding_dim_;
  const auto size = embedding_->shard().numel();
  embedding_->shard().copy_(whole_of(ck, "embedding/node", n).narrow(0, lo, size).view_as(embedding_->shard()));
  adagrad_->load_state(whole_of(ck, "embedding/adagrad", n).narrow(0, lo, size).reshape(embedding_->shard().sizes()).clone());
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
  const auto input = torch::tensor(batch.input_nodes(), torch::kInt64);
  auto rows = store_->pull(input);
  const auto pulled = store_->take_stats();
  torch::Tensor embedding;
  if (embedding_) {  // See Note [Sparse Adagrad]: a leaf whose gradient goes back to the rows' owners
    embedding = embedding_->pull(input);
    if (training) embedding.requires_grad_(true), pulled_.emplace_back(input, embedding);
  }
  if (training) {  // the metrics are training's (evaluation pulls every neighbour)
    stats_.sample_s += sample_s, stats_.fetch_s += seconds_since(start);
    stats_.rows += pulled;
    ++stats_.batches;
  }
  auto out = nn::make_blocks(batch, norm_, degrees_, std::move(rows));
  out->embedding = embedding;
  return out;
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
