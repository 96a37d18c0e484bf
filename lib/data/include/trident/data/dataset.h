// Datasets held in memory as one tensor per field (first axis = sample), so
// any sample or set of samples is one index_select away: batches, shards and
// micro-batch slices all come from the same per-sample access.
//
// Fields are named after the graph's input ops ("image", "modality0",
// "sparse3", ...) plus "label" (int64 class ids). A stage that owns only some
// input ops asks only for their fields (select()).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "trident/base/error.h"
#include "trident/formats/file_headers.h"
#include "trident/formats/sources.h"
#include "trident/graph/op_graph.h"

namespace trident::data {

// A bad data file is a formats::DataError wherever it is found: the torch-free
// header checks (formats/file_headers.h) and this library throw the same one.
using formats::DataError;

using Batch = std::map<std::string, torch::Tensor>;

struct Dataset {
  std::string name;
  std::map<std::string, torch::Tensor> fields;
  std::int64_t num_classes = 0;
  // Samples train in their order every step, not shuffled: a chunked
  // graph's chunks (Note [Node chunks] in nn/node_chunks.h).
  bool in_order = false;

  std::int64_t size() const;
  // The rows `indices` (int64, 1-D) of the chosen fields (all when empty).
  Batch batch(const torch::Tensor& indices, const std::set<std::string>& only = {}) const;
  // Checks that every input op of `graph` has a field of its per-sample shape
  // and dtype, and that the labels fit the loss; throws DataError naming it.
  void check_fits(const graph::OpGraph& graph, const std::set<std::string>& only = {}) const;
};

struct Splits {
  Dataset train;
  Dataset test;
};

// Fashion-MNIST from the IDX .gz files of Debian's dataset-fashion-mnist.
// Images become float [1,28,28] normalised by the training set's mean and
// std; labels int64. `limit` > 0 keeps only the first `limit` samples of each
// split (for quick tests).
Splits load_fashion_mnist(const std::string& dir = formats::kFashionMnistDir, std::int64_t limit = 0);
// The same with a limit per split (0: all) and only the named fields
// ("image", "label"; empty: both): a pipeline stage that reads no images
// loads none (docs/design.md, contract "The run keeps the plan").
Splits load_fashion_mnist(const std::string& dir, std::int64_t train_limit, std::int64_t test_limit,
                          const std::set<std::string>& fields);

// A graph (Note [Graphs as data] in gnn/graph_data.h; `source` a directory
// or csbm[:key=value,...]) as one sample: features float32 [1, N, F], label
// int64 [1, N] and mask float32 [1, N] — the training mask in the train
// split, the `eval` mask ("val" or "test") in the test split. Only the
// named fields are kept (empty: all). Throws gnn::GraphDataError naming the
// file and field.
// With `chunks` >= 2 (GNNPipe mode, Note [Node chunks] in nn/node_chunks.h)
// the graph is `chunks` samples instead, one per contiguous even node
// range in order: [chunks, C, F], [chunks, C], [chunks, C], C the largest
// range, shorter ranges padded with zero features, label 0 and mask 0.
Splits load_graph_dataset(const std::string& source, const std::string& eval, const std::set<std::string>& fields = {},
                          int chunks = 0);

// A batch for every input op of `graph`: float fields N(0, 1), int64 fields
// uniform ids below the op's `range`, labels uniform over the loss's classes.
// Draws from `gen` in op order (torch's default generator when undefined).
// Throws graph::GraphError for an int64 input without a positive `range`.
Batch random_batch(const graph::OpGraph& graph, std::int64_t rows, at::Generator gen = {});

// Teacher-labelled data for any graph's input fields: float fields are
// N(0, 1), int64 fields uniform ids below the input op's `range`; the label is
// the argmax of a fixed random teacher (a random linear read-out of tanh of
// each float field plus a random embedding of each id field). Deterministic
// given the seed; the test split continues the same stream.
Splits make_synthetic(const graph::OpGraph& graph, std::int64_t train_size, std::int64_t test_size,
                      std::uint64_t seed);

}  // namespace trident::data
