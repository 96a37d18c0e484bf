#include "trident/config/config.h"
#include "trident/config/plan_request.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "trident/test_paths.h"

namespace trident::config {
namespace {

const char* kGood = R"(
name: t
model: {name: mlp, preset: tiny}
train: {epochs: 2, mini_batch: 64, seed: 3}
optimizer: {name: adam, lr: 0.001}
)";

// Parses and expects a ConfigError whose one-line message holds every needle.
void expect_error(const std::string& yaml, const std::vector<std::string>& overrides,
                  const std::vector<std::string>& needles) {
  try {
    parse_config(yaml, overrides, "cfg.yaml");
    FAIL() << "expected ConfigError for " << yaml;
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

TEST(Config, GoodConfigFillsDefaults) {
  auto c = parse_config(kGood);
  EXPECT_EQ(c.model.name, "mlp");
  EXPECT_EQ(c.train.epochs, 2);
  EXPECT_EQ(c.train.mini_batch, 64);
  EXPECT_EQ(c.optimizer.name, "adam");
  EXPECT_EQ(c.data.name, "fashion-mnist");
  EXPECT_EQ(c.parallel.devices, 1);
  // The resolved YAML parses back to the same config.
  auto again = parse_config(c.to_yaml());
  EXPECT_EQ(again.to_yaml(), c.to_yaml());
}

// A user's model (docs/own-model.md): model.file names the model; the
// config round-trips without model.name; each misuse is one line.
TEST(Config, ModelFileNamesTheModelAndNpyDataIsChecked) {
  const auto dir = std::filesystem::temp_directory_path() / ("trident-config-model-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "train");
  const auto model = (dir / "model.json").string();
  {
    std::ofstream(model) << R"({"format": "trident-graph/1", "name": "Mine", "ops": [
      {"name": "x", "kind": "input", "attrs": {"field": "x", "dtype": "float32"}, "inputs": [],
       "output": {"shape": [4], "dtype": "float32"}},
      {"name": "fc", "kind": "linear", "attrs": {"in": 4, "out": 3}, "inputs": [{"op": "x", "expected": {"shape": [4], "dtype": "float32"}}],
       "output": {"shape": [3], "dtype": "float32"},
       "params": [{"name": "fc.weight", "shape": [3, 4], "dtype": "float32"}, {"name": "fc.bias", "shape": [3], "dtype": "float32"}]},
      {"name": "label", "kind": "input", "attrs": {"field": "label", "dtype": "int64"}, "inputs": [],
       "output": {"shape": [], "dtype": "int64"}},
      {"name": "loss", "kind": "cross_entropy", "inputs": [{"op": "fc", "expected": {"shape": [3], "dtype": "float32"}},
       {"op": "label", "expected": {"shape": [], "dtype": "int64"}}], "output": {"shape": [], "dtype": "float32"}}]})";
  }
  const std::string yaml = "model: {file: " + model + "}\ntrain: {mini_batch: 8}\n";
  auto c = parse_config(yaml);
  EXPECT_EQ(c.model.name, "Mine");
  EXPECT_EQ(c.name, "Mine");
  EXPECT_EQ(c.data.name, "synthetic");  // it reads x, which Fashion-MNIST lacks
  EXPECT_EQ(parse_config(c.to_yaml()).to_yaml(), c.to_yaml());
  expect_error(yaml, {"model.name=mlp"}, {"model.file", "give model.name or model.file, not both"});
  // --set key=null removes the key: a zoo example becomes an own-model run.
  auto own = parse_config(kGood, {"model.name=null", "model.preset=null", "model.file=" + model});
  EXPECT_EQ(own.model.name, "Mine");
  EXPECT_EQ(own.train.epochs, 2);
  expect_error("model: {name: mlp, weights: w.pt}\n", {}, {"model.weights", "needs model.file"});
  expect_error("model: {file: " + (dir / "none.json").string() + "}\n", {}, {"model.file", "none.json"});
  expect_error("train: {epochs: 1}\n", {}, {"model.name", "model.file"});
  expect_error(yaml, {"data.name=npy"}, {"data.name = npy needs data.train"});
  expect_error(yaml, {"data.name=npy", "data.train=" + (dir / "train").string(), "data.test=" + (dir / "train").string()},
               {"data.train", "missing x.npy", "input 'x'", "[4] float32"});
  std::filesystem::remove_all(dir);
}

TEST(Config, OverridesApplyInOrderAndCreateSections) {
  auto c = parse_config(kGood, {"train.epochs=3", "optimizer.lr=0.01", "checkpoint.every=7", "train.epochs=4"});
  EXPECT_EQ(c.train.epochs, 4);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.01);
  EXPECT_EQ(c.checkpoint.every, 7);
  expect_error(kGood, {"train.epochs"}, {"--set 'train.epochs'", "key=value"});
  expect_error(kGood, {"model.name.x=1"}, {"--set model.name.x", "not a section"});
}

TEST(Config, UnknownKeyNamesTheKeyTheAllowedOnesAndASuggestion) {
  expect_error(std::string(kGood) + "extra: 1\n", {}, {"unknown key 'extra'", "allowed top-level keys"});
  expect_error(kGood, {"train.epoch=3"}, {"unknown key 'train.epoch'", "did you mean 'epochs'", "mini_batch"});
}

TEST(Config, WrongTypeNamesFieldAndValue) {
  expect_error(kGood, {"train.epochs=three"}, {"train.epochs = 'three'", "integer >= 1"});
  expect_error(kGood, {"train.mini_batch=2.5"}, {"train.mini_batch = '2.5'", "integer"});
  expect_error(kGood, {"optimizer.lr=fast"}, {"optimizer.lr = 'fast'", "number"});
  expect_error(kGood, {"train.eval=maybe"}, {"train.eval = 'maybe'", "true or false"});
  // Found by fuzz_config: a file that is not a mapping, with a --set, escaped as a yaml-cpp error.
  expect_error("just text", {"parallel.devices=4"}, {"cfg.yaml: must be a mapping of sections", "'just text'"});
  expect_error("- a\n- b", {}, {"cfg.yaml: must be a mapping of sections", "a list"});
  expect_error(kGood, {"train=[1,2]"}, {"train", "mapping"});
  expect_error("model: [mlp]\n", {}, {"model", "mapping"});
}

TEST(Config, OutOfRangeValuesNameTheRange) {
  expect_error(kGood, {"train.epochs=0"}, {"train.epochs = '0'", ">= 1"});
  expect_error(kGood, {"optimizer.lr=-1"}, {"optimizer.lr = '-1'", "(0, inf)"});
  expect_error(kGood, {"optimizer.momentum=1"}, {"optimizer.momentum = '1'", "[0, 1)"});
  expect_error(kGood, {"train.mini_batch=70000"}, {"train.mini_batch = '70000'", "[1, 60000]"});
  expect_error(kGood, {"parallel.micro_batch=48"}, {"parallel.micro_batch = '48'", "divide train.mini_batch = 64"});
  expect_error(kGood, {"train.steps=10"}, {"train.steps", "not both"});
  expect_error(kGood, {"name=my run"}, {"name = 'my run'", "letters"});
}

TEST(Config, UnknownChoicesListTheAllowedValues) {
  expect_error(kGood, {"model.name=resnet"}, {"model.name = 'resnet'", "allowed: mlp, cnn, inception"});
  expect_error(kGood, {"optimizer.name=rmsprop"}, {"optimizer.name = 'rmsprop'", "allowed: sgd, adam"});
  expect_error(kGood, {"parallel.schedule=zb"}, {"parallel.schedule = 'zb'", "graph-1f1b"});
  expect_error(kGood, {"parallel.partitioner=magic"}, {"parallel.partitioner = 'magic'", "plan .json"});
  expect_error("train: {epochs: 1}\n", {}, {"missing key 'model.name'"});
}

TEST(Config, MissingOrMismatchedDatasetIsRejectedBeforeTraining) {
  expect_error(kGood, {"data.path=/nonexistent/fm"},
               {"data.path = '/nonexistent/fm'", "train-images-idx3-ubyte.gz", "dataset-fashion-mnist"});
  expect_error(kGood, {"model.name=mmt", "data.name=fashion-mnist"}, {"data.name", "'modality0'", "synthetic"});
  expect_error(kGood, {"model.name=mmt", "model.preset=paper"}, {"data.train_size", "MiB"});
}

TEST(Config, DistributedSettingsAreValidated) {
  auto c = parse_config(kGood, {"parallel.devices=4", "parallel.grad_sync=hybrid", "parallel.timeout_s=5"}, "cfg.yaml");
  EXPECT_EQ(c.parallel.devices, 4);
  EXPECT_EQ(c.parallel.timeout_s, 5);
  c = parse_config(std::string(kGood) + "parallel: {devices: 2, sync: {fc1.weight: sfb}}\n", {}, "cfg.yaml");
  EXPECT_EQ(c.parallel.sync.at("fc1.weight"), "sfb");
  EXPECT_NE(c.to_yaml().find("fc1.weight: sfb"), std::string::npos);
  expect_error(kGood, {"parallel.devices=0"}, {"parallel.devices = '0'"});
  expect_error(kGood, {"parallel.devices=3"}, {"parallel.devices = '3'", "must divide train.mini_batch = 64"});
  // Graph pipelines: the planner decides the split, so devices need not divide the batch.
  c = parse_config(kGood, {"parallel.devices=3", "parallel.partitioner=graphpipe", "parallel.max_replicas=2"}, "c");
  EXPECT_EQ(c.parallel.partitioner, "graphpipe");
  EXPECT_EQ(c.parallel.max_replicas, 2);
  EXPECT_EQ(c.parallel.schedule, "auto");
  EXPECT_NE(c.to_yaml().find("max_replicas: 2"), std::string::npos);
  expect_error(kGood, {"parallel.schedule=zigzag"}, {"parallel.schedule = 'zigzag'", "auto, gpipe, 1f1b, graph-1f1b"});
  expect_error(kGood, {"parallel.partitioner=plan.yaml"}, {"parallel.partitioner = 'plan.yaml'", "a plan .json path"});
  expect_error(kGood, {"parallel.devices=2", "parallel.staleness=2"},
               {"parallel.staleness = '2'", "applies to the parameter server"});
  // See Note [Staleness]: replicas only, not a pipeline's stages.
  expect_error(kGood, {"parallel.devices=2", "parallel.grad_sync=ps", "parallel.staleness=2",
                       "parallel.partitioner=graphpipe"},
               {"parallel.staleness = '2'", "applies to data-parallel replicas", "parallel.partitioner=dp"});
  EXPECT_EQ(parse_config(kGood, {"parallel.devices=2", "parallel.grad_sync=ps", "parallel.staleness=2",
                                 "parallel.partitioner=dp"}, "c")
                .parallel.staleness, 2);
  expect_error(kGood, {"parallel.timeout_s=0"}, {"parallel.timeout_s = '0'"});
  expect_error(std::string(kGood) + "parallel: {sync: {fc1.weight: nccl}}\n", {},
               {"parallel.sync.fc1.weight = 'nccl'", "allowed: allreduce, ps, sfb"});
}

TEST(Config, InvalidYamlNamesTheLine) {
  expect_error("model: {name: mlp\ntrain: [", {}, {"cfg.yaml: not valid YAML at line"});
}

}  // namespace
}  // namespace trident::config

namespace trident::config {
namespace {

// The key table in docs/config.md is the one the parser reads (see Note [Config keys]).
TEST(Config, DocsHoldTheKeyTable) {
  std::ifstream in(std::string(TRIDENT_SOURCE_DIR) + "/docs/config.md");
  std::stringstream text;
  text << in.rdbuf();
  const auto table = config_key_table();
  EXPECT_NE(text.str().find(table), std::string::npos) << "docs/config.md should hold this table:\n" << table;
}

TEST(Config, SyncOverridesOfDottedParameterNamesWorkFromTheCommandLine) {
  auto c = parse_config(kGood, {"parallel.devices=2", "parallel.sync.fc1.weight=sfb", "parallel.sync.fc1.bias=ps"});
  EXPECT_EQ(c.parallel.sync.at("fc1.weight"), "sfb");
  EXPECT_EQ(c.parallel.sync.at("fc1.bias"), "ps");
  EXPECT_EQ(c.parallel.sync.size(), 2u);
  expect_error(kGood, {"parallel.sync.fc1.weight=nccl"}, {"parallel.sync.fc1.weight = 'nccl'"});
}

TEST(Config, EveryKeyRoundTripsThroughYaml) {
  auto c = parse_config(kGood, {"train.threads=3", "parallel.bucket_mb=8", "checkpoint.keep=5", "train.eval=false",
                                "optimizer.schedule=cosine", "parallel.sync.fc1.weight=ps"});
  auto again = parse_config(c.to_yaml());
  EXPECT_EQ(again.train.threads, 3);
  EXPECT_EQ(again.parallel.bucket_mb, 8);
  EXPECT_EQ(again.checkpoint.keep, 5);
  EXPECT_FALSE(again.train.eval);
  EXPECT_EQ(again.optimizer.schedule, "cosine");
  EXPECT_EQ(again.parallel.sync.at("fc1.weight"), "ps");
  EXPECT_EQ(again.to_yaml(), c.to_yaml());
}

// The training recipe: AdamW's defaults, schedules, clipping, accumulation
// and label smoothing, each bad value one line naming its key.
TEST(Config, TheRecipeKeysAndTheirErrors) {
  auto w = parse_config(kGood, {"optimizer.name=adamw", "optimizer.lr=null"});
  EXPECT_DOUBLE_EQ(w.optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(w.optimizer.weight_decay, 0.01);  // torch's AdamW default
  EXPECT_DOUBLE_EQ(parse_config(kGood).optimizer.weight_decay, 0);
  auto c = parse_config(kGood, {"optimizer.clip_norm=1.5", "train.accumulate=4", "train.label_smoothing=0.1",
                                "optimizer.schedule=step", "optimizer.step_size=10", "optimizer.gamma=0.5"});
  auto again = parse_config(c.to_yaml());
  EXPECT_DOUBLE_EQ(again.optimizer.clip_norm, 1.5);
  EXPECT_EQ(again.train.accumulate, 4);
  EXPECT_DOUBLE_EQ(again.train.label_smoothing, 0.1);
  EXPECT_EQ(again.optimizer.step_size, 10);
  EXPECT_DOUBLE_EQ(again.optimizer.gamma, 0.5);
  EXPECT_DOUBLE_EQ(parse_config(parse_config(kGood).to_yaml()).optimizer.clip_norm, 0);  // absent: no clipping

  EXPECT_EQ(parse_config(kGood, {"train.precision=bf16"}).train.precision, "bf16");
  expect_error(kGood, {"train.precision=fp16"}, {"train.precision = 'fp16'", "allowed: fp32, bf16"});
  EXPECT_EQ(parse_config(kGood, {"train.precision=bf16", "parallel.devices=2", "parallel.grad_sync=sfb"})
                .parallel.grad_sync, "sfb");  // the factors move in bf16 (make_sfb_sync)
  EXPECT_EQ(parse_config(kGood, {"parallel.devices=2", "parallel.grad_sync=ps", "parallel.comm_dtype=bf16"})
                .parallel.comm_dtype, "bf16");
  expect_error(kGood, {"parallel.devices=2", "parallel.comm_dtype=bf16"},
               {"parallel.comm_dtype = 'bf16'", "applies to the parameter server's pushes"});
  expect_error(kGood, {"parallel.comm_dtype=fp16"}, {"parallel.comm_dtype = 'fp16'", "allowed: fp32, bf16"});
  expect_error(kGood, {"optimizer.clip_norm=0"}, {"optimizer.clip_norm = '0'", "(0, inf)"});
  expect_error(kGood, {"train.accumulate=0"}, {"train.accumulate = '0'", "[1, 64]"});
  expect_error(kGood, {"train.accumulate=3"}, {"train.accumulate = '3'", "must divide train.mini_batch = 64"});
  expect_error(kGood, {"optimizer.schedule=exponential"},
               {"optimizer.schedule = 'exponential'", "allowed: constant, cosine, linear, step"});
  expect_error(kGood, {"optimizer.schedule=step"}, {"optimizer.schedule = 'step'", "needs optimizer.step_size"});
  expect_error(kGood, {"train.label_smoothing=1"}, {"train.label_smoothing = '1'", "[0, 1)"});
  expect_error(kGood, {"optimizer.name=lamb"}, {"optimizer.name = 'lamb'", "allowed: sgd, adam, adamw"});
  expect_error(kGood, {"train.accumulate=2", "parallel.devices=2", "parallel.partitioner=graphpipe"},
               {"train.accumulate = '2'", "applies to data parallelism"});
  expect_error(kGood, {"train.accumulate=2", "parallel.micro_batch=16"}, {"train.accumulate", "not both"});
  expect_error(kGood, {"train.accumulate=8", "parallel.devices=16"},
               {"train.accumulate = '8'", "must split evenly among parallel.devices = 16"});
  expect_error(kGood,
               {"optimizer.clip_norm=1", "parallel.devices=2", "parallel.grad_sync=ps", "parallel.staleness=2"},
               {"optimizer.clip_norm", "parallel.staleness=0"});

  // Accumulation is the data-parallel plan's micro-batch (see Note [Config to request]).
  EXPECT_EQ(plan_request(parse_config(kGood, {"train.accumulate=4"})).micro_batch, 16);
  EXPECT_EQ(plan_request(parse_config(kGood, {"train.accumulate=4", "parallel.devices=2"})).micro_batch, 16);
  EXPECT_EQ(plan_request(parse_config(kGood, {"optimizer.name=adamw"})).optimizer_states, 2);
  // What moves narrower is priced so (cost::SyncWire): bf16 PS pushes, bf16 SFB factors.
  const auto narrow = plan_request(parse_config(
      kGood, {"parallel.devices=2", "parallel.grad_sync=ps", "parallel.comm_dtype=bf16", "train.precision=bf16"}));
  EXPECT_DOUBLE_EQ(narrow.wire().ps_push_scale, 0.5);
  EXPECT_EQ(narrow.wire().factor_bytes, 2);
  EXPECT_DOUBLE_EQ(plan_request(parse_config(kGood)).wire().ps_push_scale, 1);
  EXPECT_EQ(plan_request(parse_config(kGood)).wire().factor_bytes, 0);
}

// See Note [Config to request]: one classification of parallel.partitioner, and
// one request for every caller.
TEST(PlanRequest, PartitionerKindsAndTheRequestOfAConfig) {
  const std::map<std::string, std::optional<PartitionerKind>> kinds{
      {"dp", PartitionerKind::kDataParallel}, {"graphpipe", PartitionerKind::kSearch},
      {"pipedream", PartitionerKind::kSearch}, {"plans/a.json", PartitionerKind::kPlanFile},
      {".json", std::nullopt},                {"piper", std::nullopt}};
  for (const auto& [name, kind] : kinds) EXPECT_EQ(partitioner_kind(name), kind) << name;
  expect_error(kGood, {"parallel.partitioner=piper"}, {"parallel.partitioner", "allowed: graphpipe, pipedream, dp"});

  // One device is a one-stage data-parallel plan whatever the partitioner; dp takes the whole mini-batch.
  auto one = plan_request(parse_config(kGood, {"parallel.partitioner=graphpipe"}));
  EXPECT_EQ(one.partitioner, "dp");
  EXPECT_EQ(one.micro_batch, 64);
  EXPECT_EQ(one.optimizer_states, 2);  // adam
  EXPECT_EQ(one.bucket_bytes, static_cast<double>(cost::kDefaultBucketBytes));

  auto c = parse_config(kGood, {"parallel.devices=4", "parallel.partitioner=graphpipe", "parallel.staleness=0",
                                "train.threads=2", "parallel.bucket_mb=8", "parallel.max_replicas=2",
                                "parallel.sync.fc1.weight=ps", "optimizer.name=sgd", "optimizer.momentum=0"});
  auto r = plan_request(c);
  EXPECT_EQ(r.partitioner, "graphpipe");
  EXPECT_FALSE(r.micro_batch);  // searched
  EXPECT_EQ(r.devices, 4);
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.max_replicas, 2);
  EXPECT_EQ(r.bucket_bytes, 8.0 * 1024 * 1024);
  EXPECT_EQ(r.optimizer_states, 0);  // plain sgd
  EXPECT_EQ(r.sync_overrides, (std::map<std::string, std::string>{{"fc1.weight", "ps"}}));

  c.parallel.partitioner = "p.json";
  EXPECT_EQ(run_kind(c.parallel), PartitionerKind::kPlanFile);
  EXPECT_EQ(plan_request(c).partitioner, "graphpipe");  // the plan file's plan is checked by Planner::make
  c.parallel.partitioner = "dp";
  EXPECT_EQ(plan_request(c).max_replicas, 0);
  EXPECT_EQ(plan_request(c).micro_batch, 64);
}

}  // namespace
}  // namespace trident::config
