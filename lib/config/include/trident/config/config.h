// TrainConfig: one YAML file (docs/config.md), every key overridable
// with `--set dotted.key=value`. parse_config() checks every field before any
// work starts: an unknown key, a wrong type, an out-of-range value, a missing
// dataset — each is a ConfigError whose message is one line naming the field,
// the value given and what is allowed. The CLI maps it to exit code 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <map>
#include <string>
#include <vector>

#include "trident/base/error.h"
#include "trident/config/optimizer_config.h"
#include "trident/cost/buckets.h"
#include "trident/zoo/zoo.h"

namespace trident::config {

using ConfigError = ComponentError<struct ConfigErrorTag, ErrorKind::kBadInput>;

struct DataConfig {
  std::string name;  // fashion-mnist | synthetic | npy | tokens | images | tar | graph (default: the model's)
  std::string path;  // fashion-mnist directory
  // npy: directories of FIELD.npy; tokens: token files; images: image
  // folders; tar: shard patterns (docs/data.md)
  std::string train, test;
  std::int64_t train_size = 0;  // synthetic: samples; fashion-mnist: limit (0 = all)
  std::int64_t test_size = 0;
  std::string eval = "test";  // graph: the mask evaluation reads (test | val)
  // images, tar: the transform lists as JSON text (images/transforms.h);
  // empty: the defaults for the model's input size (docs/data.md)
  std::string transforms, eval_transforms;
  std::int64_t workers = 0;   // decoding threads per process; 0: automatic
  std::int64_t prefetch = 2;  // steps read ahead
  std::string on_bad_sample = "error";  // error | skip
};

struct TrainLoopConfig {
  std::int64_t epochs = 0;  // exactly one of epochs and steps is > 0
  std::int64_t steps = 0;
  std::int64_t mini_batch = 128;
  std::int64_t seed = 0;
  std::int64_t threads = 0;     // 0: all cores
  std::string device = "cpu";   // cpu | cuda (see Note [Placement] in executor/tensor_placement.h)
  std::int64_t log_every = 50;  // steps between metrics lines
  bool eval = true;             // test accuracy each epoch and at the end
  bool profile_ops = false;     // ops.json: each rank's op self times (see Note [Op self time])
  // Optimizer steps of data parallelism take mini_batch in `accumulate`
  // sequential micro-steps (gradients accumulate; the replicas sync on the
  // last): the plan's micro-batch is mini_batch / accumulate.
  std::int64_t accumulate = 1;
  // fp32 | bf16: the dtype of matrix products and convolutions (see Note
  // [Precision policy] in graph/precision.h); weights and state stay fp32.
  std::string precision = "fp32";
  double label_smoothing = 0;   // cross_entropy: torch's label_smoothing
};

// Training on `devices` processes (one per device, see `trident launch`):
// partitioner dp replicates the model (data parallel); graphpipe and
// pipedream plan a graph pipeline for `cluster` (stages of at most
// `max_replicas` replicas), and a .json path runs that plan.
struct ParallelConfig {
  std::int64_t devices = 1;
  std::string partitioner = "dp";  // graphpipe | pipedream | dp | a plan .json path
  std::int64_t micro_batch = 0;    // 0: the mini-batch
  std::string schedule = "auto";   // auto | gpipe | 1f1b | graph-1f1b (auto: graph-1f1b for graphpipe, else 1f1b)
  std::string recompute = "auto";  // auto | never | always (see Note [Recomputation] in plan/plan.h)
  std::string cluster = "auto";  // what the planner plans for: "auto" (this machine), a preset or a cluster file
  std::int64_t max_replicas = 0;   // planner: most replicas per stage (0: no limit)
  std::int64_t micro_batch_ratio = 0;  // planner: PlanRequest::micro_batch_ratio (0: its default)
  std::string grad_sync = "allreduce";  // allreduce | ps | sfb | hybrid
  std::int64_t staleness = 0;
  std::int64_t pipeline_delay = 0;  // 0 | 1: PipeDream-2BW (Note [Delayed pipelines] in schedule/delayed.h)
  std::string comm_dtype = "fp32";  // fp32 | bf16: PS gradient pushes (see Note [Push dtype] in sync/grad_sync.h)
  double timeout_s = 60;          // a collective waiting longer than this fails, naming it
  double bucket_mb = cost::kDefaultBucketBytes / cost::kBytesPerMiB;  // See Note [Gradient buckets] in cost/buckets.h
  std::map<std::string, std::string> sync;  // hybrid overrides: parameter -> allreduce | ps | sfb
};

struct CheckpointConfig {
  std::int64_t every = 0;  // steps between checkpoints; 0 = only at the end
  std::int64_t keep = 2;   // complete checkpoints kept (the newest)
};

struct TrainConfig {
  std::string name;
  zoo::ModelSpec model;
  DataConfig data;
  TrainLoopConfig train;
  OptimizerConfig optimizer;
  ParallelConfig parallel;
  CheckpointConfig checkpoint;
  std::string runs_dir = "runs";

  // The resolved config as YAML (every field, defaults filled in).
  std::string to_yaml() const;
};

// Reads `path`, applies `overrides` ("dotted.key=value", in order) and
// validates. `source` names the file in messages.
TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});
TrainConfig parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                         const std::string& source = "config");

// Every key as a Markdown table (key, default, allowed), from the one table
// the parser reads (see Note [Config keys] in config/config_keys.h); docs/config.md holds it.
std::string config_key_table();

}  // namespace trident::config
