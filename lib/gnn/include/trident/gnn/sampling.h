// Sampled mini-batches of a graph (GraphSAGE, DGL's NeighborSampler): a
// batch of seed nodes, a fan-out of sampled in-neighbours per layer, and
// the blocks those samples form (Note [Neighbour sampling]).
#pragma once

#include <cstdint>
#include <vector>

#include "trident/gnn/graph_data.h"

namespace trident::gnn {

// Note [Neighbour sampling]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Which in-neighbours node v keeps at layer l in epoch e is a pure
// function of (seed, e, l, v) (base/keyed_random.h): the same whichever
// batch v is in, whatever thread samples it, however many processes train
// — so P processes can train what one process trains. Fan-out k < 0, or a
// degree at most k without replacement, keeps every in-neighbour; without
// replacement k distinct neighbours are drawn (Floyd's algorithm) and kept
// in the order of the node's neighbour list; with replacement k draws,
// in draw order.
//
// fanouts[l] is layer l's, layer 0 the one that reads the input features
// (DGL's order). Sampling starts from the seeds with the last layer's
// fan-out: block L-1 has the seeds as destinations; its sources are the
// destinations first, then every sampled neighbour not among them, in
// order of first appearance; block l-1's destinations are block l's
// sources. Block 0's sources are the rows of input features a batch reads.

// In-neighbours per node, from the edge list (sorted by target, then
// source): neighbours[offsets[v] .. offsets[v + 1]).
struct Csr {
  std::vector<std::int64_t> offsets, neighbours;
  std::int64_t nodes() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t degree(std::int64_t v) const { return offsets[v + 1] - offsets[v]; }
};
Csr in_neighbours(const GraphData& g);

struct SampleOptions {
  std::vector<int> fanouts;  // per layer, input layer first; -1: every neighbour
  bool replace = false;
  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  int threads = 1;           // change nothing but the time it takes
};

// The in-neighbours v keeps at `layer` (Note [Neighbour sampling]).
std::vector<std::int64_t> sample_neighbours(const Csr& csr, std::int64_t v, int layer, const SampleOptions& o);

// One layer's message-flow graph: destinations, sources (destinations
// first), and each sampled edge as (local destination, local source).
struct Block {
  std::vector<std::int64_t> dst, src;
  std::vector<std::int64_t> edge_dst, edge_src;
  // GraphSAGE-mean's weights: 1 / (the destination's sampled edges).
  std::vector<float> mean_weights() const;
};

struct SampledBatch {
  std::vector<std::int64_t> seeds;
  std::vector<Block> blocks;  // blocks[l] is layer l's; blocks.back().dst == seeds
  const std::vector<std::int64_t>& input_nodes() const { return blocks.front().src; }
  std::uint64_t hash() const;  // FNV-1a of every block: equal batches, equal hashes
};

// Per seed, a hash of its sampled tree (each node's global id and, below
// it, its sampled neighbours' trees, layer by layer): what the seed's output
// depends on, so equal however the seeds are batched.
std::vector<std::uint64_t> seed_tree_hashes(const SampledBatch& batch);

// Throws GraphDataError naming the key for an empty or zero fan-out
// ("model.fanouts"), or a seed outside the graph.
SampledBatch sample_blocks(const Csr& csr, const std::vector<std::int64_t>& seeds, const SampleOptions& o);

// What a sampled step pulls, per process (Note [Row store] in
// sync/row_store.h), estimated by sampling `batches` random batches of
// `seeds` training nodes (a generator of its own: not the run's batches)
// with `o`'s fan-outs: the distinct input rows a pull reads, how many of
// them other processes own (contiguous even ranges over `processes`, so
// over the processes a (1 - 1/P) share on average, however skewed the
// graph's degrees make any one process's share), and
// the bytes a pull receives — every member's count (8 bytes each), the ids
// others ask of it (as many as it asks, on average, 8 bytes each) and the
// rows it asks for (`width` float32 each).
struct PullEstimate {
  double rows = 0, remote = 0;  // per pull
  double bytes = 0;             // per pull
};
PullEstimate estimate_pulls(const Csr& csr, const std::vector<std::int64_t>& train_nodes, std::int64_t seeds,
                            int processes, const SampleOptions& o, std::int64_t width, int batches = 8);

}  // namespace trident::gnn
