// The manifest of a sharded checkpoint (see Note [Sharded checkpoints] in
// sharded_checkpoint.h), checked whole when it is read, so that no entry is
// trusted later: every tensor names a shard file beside the manifest, a
// byte range inside it, a shape and dtype whose size is that range, and a
// CRC-32. Torch-free, so fuzz/ can fuzz it on its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/error.h"

namespace trident::checkpoint {

// A checkpoint that is missing, incomplete or corrupt; names the path.
using CheckpointError = ComponentError<struct CheckpointErrorTag, ErrorKind::kBadInput>;

inline constexpr const char* kCheckpointFormat = "trident-checkpoint/2";

// The dtypes a checkpoint holds, by name, and their sizes in bytes.
inline constexpr std::pair<const char*, int> kCheckpointDtypes[] = {
    {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8}, {"int32", 4}};

struct TensorEntry {
  std::string file;  // a shard beside the manifest, e.g. "rank-0.bin"
  std::int64_t offset = 0, bytes = 0;
  std::vector<std::int64_t> shape;
  std::string dtype;  // a name of kCheckpointDtypes
  std::uint32_t crc32 = 0;
};

struct Manifest {
  std::int64_t step = 0;
  std::map<std::string, TensorEntry> tensors;  // "param/<name>", "optim/<name>/<slot>"
};

// Reads and checks a manifest: its format, step and every tensor entry (a
// plain file name, offset and bytes >= 0, dimensions >= 0, at most 2^40
// elements, a known dtype, bytes = elements x dtype size, a 32-bit CRC).
// Throws CheckpointError naming `origin`, the tensor and the field.
Manifest parse_manifest(const nlohmann::json& manifest, const std::string& origin);

}  // namespace trident::checkpoint
