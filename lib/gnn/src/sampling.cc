#include "trident/gnn/sampling.h"

#include <algorithm>
#include <string>
#include <thread>

#include "trident/base/keyed_random.h"
#include "trident/base/hash.h"

namespace trident::gnn {

Csr in_neighbours(const GraphData& g) {
  Csr c;
  c.offsets.assign(static_cast<std::size_t>(g.nodes) + 1, 0);
  for (auto d : g.dst) ++c.offsets[static_cast<std::size_t>(d) + 1];
  for (std::size_t v = 0; v < static_cast<std::size_t>(g.nodes); ++v) c.offsets[v + 1] += c.offsets[v];
  c.neighbours.resize(g.src.size());
  std::vector<std::int64_t> at(c.offsets.begin(), c.offsets.end() - 1);
  for (std::size_t e = 0; e < g.src.size(); ++e) c.neighbours[static_cast<std::size_t>(at[g.dst[e]]++)] = g.src[e];
  return c;
}

namespace {

// How many neighbours v keeps at a layer of fan-out k.
std::int64_t kept(const Csr& csr, std::int64_t v, std::int64_t k, bool replace) {
  const auto d = csr.degree(v);
  return k < 0 || (!replace && d <= k) ? d : d == 0 ? 0 : k;
}

// Writes v's kept neighbours (kept() of them) to `out`; `picked` is scratch.
void sample_into(const Csr& csr, std::int64_t v, int layer, const SampleOptions& o, std::int64_t* out,
                 std::vector<std::int64_t>& picked) {
  const auto* first = csr.neighbours.data() + csr.offsets[v];
  const std::int64_t d = csr.degree(v), k = o.fanouts[static_cast<std::size_t>(layer)];
  if (k < 0 || (!o.replace && d <= k)) {
    std::copy(first, first + d, out);
    return;
  }
  if (d == 0) return;
  KeyedRandom random({o.seed, static_cast<std::uint64_t>(o.epoch), static_cast<std::uint64_t>(layer),
                      static_cast<std::uint64_t>(v)});
  if (o.replace) {
    for (std::int64_t i = 0; i < k; ++i) out[i] = first[random.below(d)];
    return;
  }
  // Floyd: k distinct positions of [0, d), each subset equally likely.
  picked.clear();
  for (std::int64_t j = d - k; j < d; ++j) {
    const auto t = random.below(j + 1);
    picked.push_back(std::find(picked.begin(), picked.end(), t) == picked.end() ? t : j);
  }
  std::sort(picked.begin(), picked.end());
  for (std::size_t i = 0; i < picked.size(); ++i) out[i] = first[picked[i]];
}

}  // namespace

std::vector<std::int64_t> sample_neighbours(const Csr& csr, std::int64_t v, int layer, const SampleOptions& o) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(kept(csr, v, o.fanouts.at(static_cast<std::size_t>(layer)), o.replace)));
  std::vector<std::int64_t> picked;
  sample_into(csr, v, layer, o, out.data(), picked);
  return out;
}

std::vector<float> Block::mean_weights() const {
  std::vector<std::int64_t> count(dst.size(), 0);
  for (auto d : edge_dst) ++count[static_cast<std::size_t>(d)];
  std::vector<float> w;
  for (auto d : edge_dst) w.push_back(1.0f / static_cast<float>(count[static_cast<std::size_t>(d)]));
  return w;
}

std::uint64_t SampledBatch::hash() const {
  std::uint64_t h = kFnvOffset;
  auto mix = [&](const std::vector<std::int64_t>& v) {
    h = fnv1a(v.data(), v.size() * sizeof(std::int64_t), h);
    const unsigned char separator = 0xff;  // [1][2] differs from [1, 2]
    h = fnv1a(&separator, 1, h);
  };
  mix(seeds);
  for (const auto& b : blocks) mix(b.dst), mix(b.src), mix(b.edge_dst), mix(b.edge_src);
  return h;
}

namespace {

std::uint64_t tree_hash(const SampledBatch& b, const std::vector<std::vector<std::int64_t>>& first, std::size_t l,
                        std::int64_t dst) {
  const auto& block = b.blocks[l];
  std::uint64_t h = fnv1a(&block.dst[static_cast<std::size_t>(dst)], sizeof(std::int64_t));
  for (auto e = first[l][static_cast<std::size_t>(dst)]; e < first[l][static_cast<std::size_t>(dst) + 1]; ++e) {
    const auto u = block.edge_src[static_cast<std::size_t>(e)];
    const std::uint64_t below = l ? tree_hash(b, first, l - 1, u) : fnv1a(&block.src[static_cast<std::size_t>(u)], sizeof(std::int64_t));
    h = fnv1a(&below, sizeof below, h);
  }
  return h;
}

}  // namespace

std::vector<std::uint64_t> seed_tree_hashes(const SampledBatch& batch) {
  // first[l][i]: block l's first edge of destination i (edges are grouped by destination).
  std::vector<std::vector<std::int64_t>> first;
  for (const auto& block : batch.blocks) {
    std::vector<std::int64_t> f(block.dst.size() + 1, 0);
    for (auto d : block.edge_dst) ++f[static_cast<std::size_t>(d) + 1];
    for (std::size_t i = 0; i < block.dst.size(); ++i) f[i + 1] += f[i];
    first.push_back(std::move(f));
  }
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < batch.seeds.size(); ++i)
    out.push_back(tree_hash(batch, first, batch.blocks.size() - 1, static_cast<std::int64_t>(i)));
  return out;
}

SampledBatch sample_blocks(const Csr& csr, const std::vector<std::int64_t>& seeds, const SampleOptions& o) {
  if (o.fanouts.empty()) throw GraphDataError("model.fanouts: empty; give one fan-out per layer, e.g. [15, 10, 5]");
  for (std::size_t l = 0; l < o.fanouts.size(); ++l)
    if (o.fanouts[l] == 0 || o.fanouts[l] < -1)
      throw GraphDataError("model.fanouts[" + std::to_string(l) + "] = " + std::to_string(o.fanouts[l]) +
                           ": a fan-out is at least 1, or -1 for every neighbour");
  for (auto s : seeds)
    if (s < 0 || s >= csr.nodes())
      throw GraphDataError("seed node " + std::to_string(s) + " is outside the graph's " + std::to_string(csr.nodes()) +
                           " nodes");
  SampledBatch batch;
  batch.seeds = seeds;
  batch.blocks.resize(o.fanouts.size());
  std::vector<std::int64_t> frontier = seeds;
  // Local numbers by first appearance, in an array over the graph's nodes
  // (-1: not yet numbered), kept per thread and reset after each block.
  thread_local std::vector<std::int64_t> local;
  if (static_cast<std::int64_t>(local.size()) != csr.nodes()) local.assign(static_cast<std::size_t>(csr.nodes()), -1);
  for (int layer = static_cast<int>(o.fanouts.size()) - 1; layer >= 0; --layer) {
    // Each destination's sample is its own pure function: threads split
    // them, each writing its destinations' runs of one flat array.
    const std::int64_t k = o.fanouts[static_cast<std::size_t>(layer)];
    std::vector<std::int64_t> at(frontier.size() + 1, 0);
    for (std::size_t i = 0; i < frontier.size(); ++i) at[i + 1] = at[i] + kept(csr, frontier[i], k, o.replace);
    std::vector<std::int64_t> sampled(static_cast<std::size_t>(at.back()));
    const int threads = std::max(1, std::min<int>(o.threads, static_cast<int>(frontier.size() / 64 + 1)));
    auto run = [&](int t) {
      std::vector<std::int64_t> picked;
      for (std::size_t i = static_cast<std::size_t>(t); i < frontier.size(); i += static_cast<std::size_t>(threads))
        sample_into(csr, frontier[i], layer, o, sampled.data() + at[i], picked);
    };
    if (threads == 1) {
      run(0);
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) pool.emplace_back(run, t);
      for (auto& th : pool) th.join();
    }
    auto& b = batch.blocks[static_cast<std::size_t>(layer)];
    b.dst = frontier;
    b.src = frontier;
    for (std::size_t i = 0; i < frontier.size(); ++i)
      if (local[static_cast<std::size_t>(frontier[i])] < 0) local[static_cast<std::size_t>(frontier[i])] = static_cast<std::int64_t>(i);
    b.edge_dst.resize(sampled.size()), b.edge_src.resize(sampled.size());
    for (std::size_t i = 0; i < frontier.size(); ++i)
      for (auto e = at[i]; e < at[i + 1]; ++e) {
        const auto u = sampled[static_cast<std::size_t>(e)];
        auto& id = local[static_cast<std::size_t>(u)];
        if (id < 0) id = static_cast<std::int64_t>(b.src.size()), b.src.push_back(u);
        b.edge_dst[static_cast<std::size_t>(e)] = static_cast<std::int64_t>(i);
        b.edge_src[static_cast<std::size_t>(e)] = id;
      }
    for (auto v : b.src) local[static_cast<std::size_t>(v)] = -1;
    frontier = b.src;
  }
  return batch;
}

PullEstimate estimate_pulls(const Csr& csr, const std::vector<std::int64_t>& train_nodes, std::int64_t seeds,
                            int processes, const SampleOptions& o, std::int64_t width, int batches) {
  PullEstimate e;
  if (train_nodes.empty() || seeds < 1 || batches < 1) return e;
  KeyedRandom pick({0x5eed'e571ULL, static_cast<std::uint64_t>(seeds), static_cast<std::uint64_t>(processes)});
  auto pool = train_nodes;
  const auto n = static_cast<std::int64_t>(pool.size()), take = std::min(seeds, n);
  for (int b = 0; b < batches; ++b) {
    for (std::int64_t i = 0; i < take; ++i)  // distinct seeds, as an epoch's batches hold
      std::swap(pool[static_cast<std::size_t>(i)], pool[static_cast<std::size_t>(i + pick.below(n - i))]);
    const std::vector<std::int64_t> batch(pool.begin(), pool.begin() + take);
    auto sample = o;
    sample.epoch = -1 - b;
    // Block 0's sources are distinct. Whichever process pulls this batch: the
    // mean over them of the rows it does not own.
    const double rows = static_cast<double>(sample_blocks(csr, batch, sample).input_nodes().size());
    e.rows += rows, e.remote += processes > 1 ? rows - rows / processes : 0;
  }
  e.rows /= batches, e.remote /= batches;
  e.bytes = processes > 1 ? 8.0 * processes + e.remote * (8.0 + 4.0 * static_cast<double>(width)) : 0;
  return e;
}

}  // namespace trident::gnn
