// Token sequences for language models: `data: {name: tokens, train: FILE,
// test: FILE}`, each FILE an .npy of int64 token ids [N, T+1] (numpy.save).
// Sample n is row n: the model's ids are its positions 0..T-1 and the labels
// the next tokens, positions 1..T (a label per position: Note [Token losses]
// in graph/op_graph.h). The ids field is the model's int64 input of the
// labels' shape ([T]; gpt's `ids`). Each split is held in memory whole.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "trident/data/dataset.h"
#include "trident/graph/op_graph.h"

namespace trident::data {

// The field that takes the ids in `graph`: its one int64 input of the
// labels' shape, other than `label`. Throws DataError naming the model when
// it has none (its loss is not a per-token cross_entropy, or no input fits).
std::string token_field(const graph::OpGraph& graph);

// The ids input of `graph`: its field, positions T and id range (the
// vocabulary). Throws as token_field does.
struct TokenInput {
  std::string field;
  std::int64_t positions = 0, range = 0;
};
TokenInput token_input(const graph::OpGraph& graph);

// Both splits, with the fields of `fields` that are the ids' or `label`.
// Throws DataError naming the file for an array that is not int64 [N, T+1]
// with T the model's positions, or that holds an id outside [0, the ids
// input's range).
Splits load_tokens(const graph::OpGraph& graph, const std::string& train_file, const std::string& test_file,
                   const std::set<std::string>& fields);

}  // namespace trident::data
