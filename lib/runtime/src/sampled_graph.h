// The graph side of sampled GNN training (Note [Sampled blocks] in
// nn/sampled_blocks.h, docs/gnn.md): the graph's structure on every rank,
// its features sharded over the ranks in a RowStore (Note [Row store] in
// sync/row_store.h), the seed nodes as datasets, and each micro-batch's
// blocks — sampled a step ahead on a thread, their input rows pulled when
// the forward asks.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "trident/config/config.h"
#include "trident/data/source.h"
#include "trident/gnn/sampling.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/nn/sampled_blocks.h"
#include "trident/optim/sparse_adagrad.h"
#include "trident/sync/row_store.h"

namespace trident::runtime {

class SampledGraph {
 public:
  // Whether `model` trains on sampled blocks (it has block ops).
  static bool applies(const graph::OpGraph& model);

  // Loads config.model.graph with its features (once per process);
  // `threads` sample a micro-batch that was not sampled ahead.
  SampledGraph(const config::TrainConfig& c, const graph::OpGraph& model, int threads);
  ~SampledGraph();

  // The seeds as datasets of fields `node` (the id) and `label`: the
  // training mask's nodes, and data.eval's mask's for evaluation.
  data::Sources seeds() const;

  // Keeps rows [bounds[p], bounds[p+1]) of the features (p this member of
  // `group`, even ranges) in a RowStore over `group` and frees the rest.
  void shard(comm::Group group);

  // The blocks of `nodes` (int64 [n]): sampled with the fan-outs at the
  // current epoch when training, with every neighbour when not; their
  // input rows pulled from the store (a collective: see Note [Row store]).
  std::shared_ptr<const nn::SampledBlocks> blocks(const torch::Tensor& nodes, bool training);

  // The step (and its epoch) blocks(…, true) samples for; forgets what was
  // sampled ahead for earlier steps.
  void set_step(std::int64_t step, std::int64_t epoch);
  // Starts sampling step `step`'s micro-batches (`nodes`, at `epoch`) on a
  // thread; blocks() for the same nodes in that step takes them. The
  // trainer asks a step ahead: at most two steps' batches are held.
  void prefetch(std::int64_t step, std::vector<torch::Tensor> nodes, std::int64_t epoch);

  // Learnable node embeddings (model.node_embedding; Note [Sparse
  // Adagrad]): after a step's backward, every rank calls this once — the
  // gradients of the rows its micro-batches pulled go to their owners, who
  // update them at `lr`. Nothing without embeddings.
  void update_embeddings(double lr);
  // This rank's embedding rows and their Adagrad state, for its checkpoint
  // shard ("embedding/node@OFFSET", "embedding/adagrad@OFFSET": flat spans
  // of the [N, D] tables), and their loading from a checkpoint written on
  // any number of processes. Throws checkpoint::CheckpointError when the
  // checkpoint lacks them or they do not fit.
  checkpoint::NamedTensors embedding_entries() const;
  void load_embeddings(const checkpoint::CheckpointReader& ck);

  struct Stats {
    std::int64_t batches = 0;
    double sample_s = 0;       // sampling this rank waited for (not what ran ahead)
    double fetch_s = 0;        // pulling input rows
    sync::RowStats rows;       // local and remote rows, bytes
  };
  Stats take_stats();

  std::int64_t nodes() const { return csr_.nodes(); }
  // Bytes of the features this rank holds (its shard).
  std::int64_t held_bytes() const { return store_ ? static_cast<std::int64_t>(store_->shard().nbytes()) : 0; }
  const std::vector<int>& fanouts() const { return options_.fanouts; }

 private:
  gnn::SampleOptions options_at(std::int64_t epoch, bool training) const;
  void log_trees(const gnn::SampledBatch& batch) const;  // See Note [Test hooks]

  const config::TrainConfig& config_;
  std::string norm_;  // mean | gcn | edges (Note [Sampled blocks])
  gnn::GraphData graph_;  // its features freed by shard()
  gnn::Csr csr_;
  std::vector<std::int64_t> degrees_;
  gnn::SampleOptions options_;
  std::int64_t step_ = 0, epoch_ = 0;
  std::unique_ptr<sync::RowStore> store_;
  std::int64_t embedding_dim_ = 0;
  std::unique_ptr<sync::RowStore> embedding_;  // See Note [Sparse Adagrad]
  std::unique_ptr<optim::SparseAdagrad> adagrad_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pulled_;  // this step's (ids, embedding leaf) per micro-batch
  torch::Tensor whole_;  // the features before shard(), [N, F]
  struct Ahead {
    std::vector<std::int64_t> nodes;
    std::int64_t step, epoch;
    std::shared_future<gnn::SampledBatch> batch;
  };
  std::vector<Ahead> ahead_;
  Stats stats_;
  std::string tree_log_;  // TRIDENT_TEST_SAMPLE_LOG's file for seed trees, or empty
  int rank_ = 0, rank_in_group_ = 0;
  int threads_ = 1;  // sampling what was not sampled ahead
};

}  // namespace trident::runtime
