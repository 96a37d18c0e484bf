// Where a run's samples come from (Note [Sources]): one interface over data
// held in memory (Dataset) and data read from files as it is needed (image
// folders, tar shards, token files, memory-mapped arrays).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "trident/data/dataset.h"
#include "trident/graph/op_graph.h"

namespace trident::data {

// Note [Sources]
// ~~~~~~~~~~~~~~
// A Source is a dataset split as a function of the sample id: size(), the
// fields it gives with their per-sample specs, and read_sample(id, epoch),
// which writes one sample's fields into rows the caller owns. Nothing is
// loaded whole: a streamed source keeps only its index (file list,
// offsets, labels) and reads a sample's bytes when asked. read_sample is a
// pure function of (id, epoch) and the run's seed — the epoch only keys
// augmentation (Note [Keyed augmentation] in images/transforms.h) — so any
// thread may call it, in any order, and the same global batch comes out
// whatever the number of workers, processes, stages or replicas
// (contract 17, docs/design.md). Labels come from the index, so reading
// only "label" decodes nothing.
//
// A sample that cannot be read throws DataError (bad input) naming the
// file and the sample id; the Loader decides whether that stops the run or
// the sample is replaced (data.on_bad_sample).
class Source {
 public:
  virtual ~Source() = default;
  const std::string& name() const { return name_; }
  virtual std::int64_t size() const = 0;
  virtual std::int64_t num_classes() const = 0;
  // Samples train in their order every step (a chunked graph's chunks).
  virtual bool in_order() const { return false; }
  // The fields it gives, by name, with their per-sample shape and dtype.
  virtual std::map<std::string, graph::TensorSpec> specs() const = 0;
  // Whether reading costs enough (decoding, files) to spread over workers.
  virtual bool streams() const { return true; }
  // Sample `id`'s fields into `rows` (field -> a tensor of its per-sample
  // spec, any subset of specs()).
  virtual void read_sample(std::int64_t id, std::int64_t epoch, std::map<std::string, torch::Tensor>& rows) const = 0;
  // The rows `ids` (int64, 1-D) of the fields `only` (all when empty).
  virtual Batch read(const torch::Tensor& ids, const std::set<std::string>& only, std::int64_t epoch) const;
  // A hash of what the samples are (the index, the files' sizes): a
  // checkpoint records it and a resumed run must find the same. 0: unknown.
  virtual std::uint64_t identity() const { return 0; }
  // Every input op of `graph` whose field is in `only` (all when empty)
  // has a field of its spec, and labels fit the loss; throws DataError.
  virtual void check_fits(const graph::OpGraph& graph, const std::set<std::string>& only = {}) const;
  // Empty tensors [rows, spec...] for the fields `only` (all when empty).
  Batch allocate(std::int64_t rows, const std::set<std::string>& only) const;

 protected:
  explicit Source(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// A Dataset held in memory as a Source (index_select, no workers).
class MemorySource final : public Source {
 public:
  explicit MemorySource(Dataset d);
  std::int64_t size() const override { return d_.size(); }
  std::int64_t num_classes() const override { return d_.num_classes; }
  bool in_order() const override { return d_.in_order; }
  std::map<std::string, graph::TensorSpec> specs() const override;
  bool streams() const override { return false; }
  void read_sample(std::int64_t id, std::int64_t epoch, std::map<std::string, torch::Tensor>& rows) const override;
  Batch read(const torch::Tensor& ids, const std::set<std::string>& only, std::int64_t epoch) const override;
  // Dataset::check_fits: also every label against the loss's classes.
  void check_fits(const graph::OpGraph& graph, const std::set<std::string>& only = {}) const override;

 private:
  Dataset d_;
};

struct Sources {
  std::shared_ptr<const Source> train, test;
};

// Both splits of `s` as memory sources.
Sources in_memory(Splits s);

}  // namespace trident::data
