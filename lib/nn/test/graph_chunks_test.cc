// GNNPipe mode's aggregation (Note [Node chunks] in nn/node_chunks.h): all
// chunks in one micro-batch are the exact model; chunk by chunk, every
// neighbour read is live, this epoch's or one epoch old, counted as the
// adjacency says, and an older read throws; a recomputed forward reads what
// the first one read.
#include <gtest/gtest.h>

#include "trident/data/dataset.h"
#include "trident/gnn/graph_data.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/node_chunks.h"
#include "trident/nn/random.h"
#include "trident/zoo/zoo.h"

namespace trident::nn {
namespace {

const char* kSource = "csbm:nodes=62,classes=3,features=4,train_per_class=5,seed=2";
constexpr int kChunks = 4;  // 16, 16, 15, 15 nodes: two chunks padded

std::shared_ptr<NodeChunks> chunks_of(std::int64_t first, std::int64_t count, std::int64_t step, bool training,
                                      double mask_total = 0) {
  auto c = std::make_shared<NodeChunks>();
  c->chunks = kChunks, c->bounds = gnn::even_bounds(62, kChunks);
  c->first = first, c->count = count, c->step = step, c->training = training, c->mask_total = mask_total;
  return c;
}

graph::OpGraph chunked(const std::string& name) { return zoo::build_graph({name, "tiny", "", "", kSource, kChunks}); }

// Evaluation's micro-batch holds every chunk: logits, loss and accuracy are
// the whole graph's on the same weights, the logits bit for bit.
TEST(NodeChunks, AllChunksInOneMicroBatchAreTheExactModel) {
  const auto whole = data::load_graph_dataset(kSource, "test");
  const auto parts = data::load_graph_dataset(kSource, "test", {}, kChunks);
  ASSERT_EQ(parts.test.size(), kChunks);
  EXPECT_TRUE(parts.train.in_order);
  for (const std::string name : {"gcn2", "gcnii4", "jk_gcn3", "appnp"}) {
    SCOPED_TRACE(name);
    const auto g = zoo::build_graph({name, "tiny", "", "", kSource});
    const auto gc = chunked(name);
    GraphModule exact(g, 3), pieces(gc, 3);
    exact.eval(), pieces.eval();
    torch::NoGradGuard no_grad;
    const auto logits_of = [](const graph::OpGraph& graph) { return graph.op(graph.loss()).inputs.at(0).producer; };
    auto run = [&](GraphModule& m, const graph::OpGraph& graph, const data::Dataset& d) {
      auto sg = graph::whole_graph(graph);
      sg.outputs.push_back(logits_of(graph));
      return GraphExecutor(m, sg).forward({}, d.batch(torch::arange(d.size())));
    };
    const auto a = run(exact, g, whole.test);
    const double right = correct_predictions("masked_cross_entropy", a.at(logits_of(g)), whole.test.fields.at("label"),
                                             whole.test.fields.at("mask"));
    const auto mask = parts.test.fields.at("mask");
    NodeChunkScope scope(chunks_of(0, kChunks, 0, false, mask.sum().item<double>()));
    const auto b = run(pieces, gc, parts.test);
    const auto bounds = gnn::even_bounds(62, kChunks);
    std::vector<torch::Tensor> rows;
    const auto lb = b.at(logits_of(gc));
    for (int k = 0; k < kChunks; ++k) rows.push_back(lb[k].narrow(0, 0, bounds[k + 1] - bounds[k]));
    const double diff = (torch::cat(rows) - a.at(logits_of(g))[0]).abs().max().item<double>();
    std::cout << name << " logits differ by " << diff << "\n";
    EXPECT_LE(diff, 1e-6);
    EXPECT_NEAR(b.at(gc.loss()).item<double>() / kChunks, a.at(g.loss()).item<double>(), 1e-6);
    const auto labels = parts.test.fields.at("label");
    EXPECT_DOUBLE_EQ(correct_predictions("masked_cross_entropy", lb, labels, mask) / kChunks, right);
  }
}

ChunkReads reads_of(const std::string& op) {
  const auto all = chunk_reads();
  return all.count(op) ? all.at(op) : ChunkReads{};
}

// One training step, chunk by chunk in order (all but `skip`).
void train_step(GraphModule& m, const graph::OpGraph& g, const data::Dataset& d, std::int64_t step, int skip = -1) {
  GraphExecutor ex(m, graph::whole_graph(g));
  for (int k = 0; k < kChunks; ++k) {
    if (k == skip) continue;
    NodeChunkScope scope(chunks_of(k, 1, step, true, d.fields.at("mask").sum().item<double>()));
    ex.forward({}, d.batch(torch::tensor({std::int64_t{k}}))).at(g.loss()).backward();
  }
}

TEST(NodeChunks, ReadsAreAtMostOneEpochOldAndCountedAsPlanned) {
  const auto parts = data::load_graph_dataset(kSource, "test", {}, kChunks);
  const auto g = chunked("gcn2");
  GraphModule m(g, 3);
  const auto want = gnn::chunk_read_counts(gnn::constant_adjacency(g), gnn::even_bounds(62, kChunks), 1);
  ASSERT_GT(want.stale, 0);
  ASSERT_GT(want.fresh, 0);
  const std::string op = "conv1.aggregate";
  // The first step reads zeros where later chunks have not been written yet.
  auto before = reads_of(op);
  train_step(m, g, parts.train, 0);
  auto now = reads_of(op);
  EXPECT_EQ(now.own - before.own, want.own);
  EXPECT_EQ(now.fresh - before.fresh, want.fresh);
  EXPECT_EQ(now.cold - before.cold, want.stale);
  EXPECT_EQ(now.stale - before.stale, 0);
  for (std::int64_t step = 1; step <= 2; ++step) {
    before = reads_of(op);
    train_step(m, g, parts.train, step);
    now = reads_of(op);
    EXPECT_EQ(now.own - before.own, want.own);
    EXPECT_EQ(now.fresh - before.fresh, want.fresh);
    EXPECT_EQ(now.stale - before.stale, want.stale);
    EXPECT_EQ(now.cold - before.cold, 0);
  }
  // Chunk 2 skips step 3: at step 4 its rows are two epochs old.
  train_step(m, g, parts.train, 3, /*skip=*/2);
  try {
    train_step(m, g, parts.train, 4);
    FAIL() << "a read two epochs old passed";
  } catch (const Failure& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 2's rows from step 2"), std::string::npos) << e.what();
  }
}

// See Note [Recomputation]: a recomputing stage's forward runs without
// autograd, then again before its backward; the second reads the cached rows
// the first read, though other chunks wrote newer ones in between.
TEST(NodeChunks, RecomputedForwardReadsWhatTheFirstRead) {
  const auto parts = data::load_graph_dataset(kSource, "test", {}, kChunks);
  const auto g = chunked("gcn2");
  GraphModule m(g, 3);
  train_step(m, g, parts.train, 0);
  auto sg = graph::whole_graph(g);
  const auto logits = g.op(g.loss()).inputs.at(0).producer;
  sg.outputs.push_back(logits);
  GraphExecutor ex(m, sg);
  auto chunk = [&](int k, bool grad) {
    torch::AutoGradMode mode(grad);
    RandomScope random(RandomKey{5, 1, k});  // dropout draws as a recomputation would: the same mask again
    NodeChunkScope scope(chunks_of(k, 1, 1, true));
    return ex.forward({}, parts.train.batch(torch::tensor({std::int64_t{k}}))).at(logits).detach();
  };
  const auto first = chunk(0, false);
  for (int k = 1; k < kChunks; ++k) chunk(k, true);  // chunk 0 reads their rows: now this step's, not the last's
  const auto again = chunk(0, true);
  // Bitwise: the same forward on the same weights and cached rows in this process, with and without autograd:
  // the same kernels.
  EXPECT_TRUE(torch::equal(first, again)) << (first - again).abs().max().item<double>();
  EXPECT_FALSE(torch::equal(first, chunk(0, true)));  // a new forward reads this step's rows
}

}  // namespace
}  // namespace trident::nn
