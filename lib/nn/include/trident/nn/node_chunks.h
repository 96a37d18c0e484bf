// Note [Node chunks]
// ~~~~~~~~~~~~~~~~~~
// GNNPipe mode (Chen et al. 2023; `model.graph_chunks: K`, docs/gnn.md) —
// labelled not equal to one process: the graph's nodes split into K
// contiguous, even ranges (chunks); each is one sample [C, d], padded to the
// largest range C, and the K samples are the step's mini-batch, in node
// order every step (Dataset::in_order). So chunks flow through a layer
// split's stages as micro-batches, and a stage's activations and messages
// are a chunk's, not the graph's. Row-wise ops run on a chunk as they are.
// graph_aggregate needs neighbours in other chunks: each aggregation keeps,
// on the process that runs it, a cache of its input's rows for every node,
// written by every training forward. A micro-batch's rows of A.X read
//   its own chunks' rows   live: this forward's input, gradients flow back;
//   other chunks' rows     from the cache, as constants (no gradient, as
//                          GNNPipe's and PipeGCN's historical embeddings):
//                          this step's where that chunk passed this op
//                          earlier in the step ("fresh"), else the previous
//                          step's ("stale") — one graph per step, so a step
//                          is an epoch and no read is older than one epoch;
//   and on the first step a process trains, zeros for chunks not yet
//   written ("cold"). Every read is checked: a chunk last written more than
//   one step back throws Failure. Reads of each kind are counted per op
//   (chunk_reads). A recomputing stage's second forward reads the cached
//   rows its first forward read, so its gradients are that forward's.
// Evaluation runs all K chunks as one micro-batch: every read is live, the
// product is the whole graph's A.X, bit for bit the exact model's.
// masked_cross_entropy and the accuracy divide a chunk's masked sums by the
// whole split's masked count over K (the step divides by its K samples), so
// a step's loss is the whole graph's masked mean.
// The executor opens a NodeChunkScope around every forward and backward of
// a chunked model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "trident/nn/thread_scope.h"

namespace trident::nn {

struct NodeChunks {
  int chunks = 0;
  std::vector<std::int64_t> bounds;   // chunks + 1 ascending node ids: chunk k is [bounds[k], bounds[k+1])
  std::int64_t first = 0, count = 0;  // this micro-batch's chunks, [first, first + count)
  std::int64_t step = 0;              // the optimizer step (one epoch)
  bool training = false;              // a training forward: caches are read, checked and written
  double mask_total = 0;              // masked nodes of the whole split (0: this micro-batch's own)
};

// Sets this thread's chunks until it closes (scopes nest).
using NodeChunkScope = ThreadScope<NodeChunks>;

// This thread's chunks, or null outside every scope.
inline const std::shared_ptr<const NodeChunks>& node_chunks() { return NodeChunkScope::current(); }

// Neighbour reads of one aggregation (adjacency entries, self loops
// included), by where the row came from.
struct ChunkReads {
  std::int64_t own = 0, fresh = 0, stale = 0, cold = 0;
  std::int64_t total() const { return own + fresh + stale + cold; }
};
// This process's reads per graph_aggregate op name, since it started
// (thread-safe; an op runs on one rank).
std::map<std::string, ChunkReads> chunk_reads();
void add_chunk_reads(const std::string& op, const ChunkReads& reads);

}  // namespace trident::nn
