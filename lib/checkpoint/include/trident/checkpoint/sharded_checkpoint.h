// Sharded checkpoints (docs/design.md, contract "Checkpoints are keyed by parameter name"): each rank writes
// only the tensors it owns; a manifest says where every tensor is; a run
// resumes on any plan, each rank reading only the tensors its stage needs.
//
// Note [Sharded checkpoints]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Layout of one checkpoint, runs/<name>/checkpoints/step-<N>/:
//   manifest.json  {"format": "trident-checkpoint/2", "step", "wall_s",
//                   "model", "preset", "config" (resolved YAML), "plan",
//                   "tensors": {key: {file, offset, bytes, shape, dtype, crc32}}}
//   rank-<r>.bin   the raw bytes of rank r's tensors, back to back
// Keys are "param/<parameter name>" and "optim/<parameter name>/<slot>".
// Writing (every rank calls ShardWriter; rank 0 publishes):
//   1. rank 0 empties checkpoints/.step-<N>.partial/; the ranks meet;
//   2. each rank writes its shard there, flushes and fsyncs it;
//   3. the ranks meet again, exchanging their entries;
//   4. rank 0 writes manifest.json (atomically), fsyncs the directory and
//      renames .step-<N>.partial to step-<N>, then fsyncs checkpoints/ and
//      deletes all but the newest `keep` checkpoints.
// Only directories named step-<N> that hold a manifest count as
// checkpoints, so a crash at any point (a rank killed mid-write included)
// leaves the previous checkpoint usable; the partial directory is removed
// by the next save. Every tensor carries a CRC-32 checked on reading.
// The ranks share one file system (one machine, or a shared mount).
//
// Note [Weights PyTorch loads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The file torch.save would write for a dict of
// tensors. torch::pickle_save tags the dict with its type
// (torch.jit._pickle.restore_type_tag), which PyTorch 2.6 and later refuse to
// load by default (torch.load(weights_only=True)); written without the tag,
// python3-torch 1.13, PyTorch 2.x and LibTorch all read it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "trident/base/error.h"
#include "trident/checkpoint/manifest.h"  // CheckpointError, parse_manifest

namespace trident::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// checkpoints/.step-<N>.partial and checkpoints/step-<N> under `run_dir`.
std::string partial_checkpoint_dir(const std::string& run_dir, std::int64_t step);
std::string checkpoint_dir(const std::string& run_dir, std::int64_t step);

// Step 2 of Note [Sharded checkpoints]: writes `tensors` (key -> tensor) to
// dir/file, fsyncs it, and returns their manifest entries keyed like
// `tensors`. Throws CheckpointError naming the file on an I/O error.
nlohmann::json write_shard(const std::string& dir, const std::string& file, const NamedTensors& tensors);

// Step 4: `manifest` gets "format"; then written, renamed into place, and
// older checkpoints pruned to `keep` (>= 1). Throws CheckpointError.
void publish_checkpoint(const std::string& run_dir, std::int64_t step, nlohmann::json manifest, int keep);

// The newest complete checkpoint of a run, read tensor by tensor. Also
// reads the single-file checkpoint.pt of earlier versions.
class CheckpointReader {
 public:
  // Throws CheckpointError when the run has no complete checkpoint.
  static CheckpointReader latest(const std::string& run_dir);
  // One checkpoint directory (holding manifest.json) or a legacy .pt file.
  static CheckpointReader open(const std::string& path);

  std::int64_t step() const { return step_; }
  const nlohmann::json& manifest() const { return manifest_; }  // legacy: its "meta"
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;
  // Keys that start with `prefix` ("param/", "optim/<name>/"), sorted.
  std::vector<std::string> keys(const std::string& prefix) const;
  // Reads only this tensor's bytes; checks its CRC-32. Throws CheckpointError.
  torch::Tensor read(const std::string& key) const;

 private:
  std::string path_;
  std::int64_t step_ = 0;
  nlohmann::json manifest_;
  Manifest entries_;  // manifest_, checked (parse_manifest)
  std::shared_ptr<std::map<std::string, torch::Tensor>> legacy_;  // checkpoint.pt, loaded whole
};

// `trident export`: the checkpoint's weights as one file that plain PyTorch
// loads — torch.load(path) gives a dict {parameter name: tensor}, a
// state_dict for a module whose parameter names are trident's. Written
// atomically; returns how many tensors it holds.
std::size_t export_weights(const CheckpointReader& checkpoint, const std::string& path);

}  // namespace trident::checkpoint
