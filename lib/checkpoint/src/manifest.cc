#include "trident/checkpoint/manifest.h"

#include "trident/base/json.h"

namespace trident::checkpoint {
namespace {

int dtype_bytes(const std::string& name) {
  for (const auto& [n, bytes] : kCheckpointDtypes)
    if (name == n) return bytes;
  return 0;
}

TensorEntry parse_entry(const nlohmann::json& e, const std::string& where) {
  auto bad = [&](const std::string& field, const std::string& what) {
    return CheckpointError(where + ": '" + field + "' " + what + " (corrupt manifest)");
  };
  if (!e.is_object()) throw bad("entry", "must be an object");
  TensorEntry t;
  for (const char* field : {"file", "offset", "bytes", "shape", "dtype", "crc32"})
    if (!e.contains(field)) throw bad(field, "is missing");
  if (!e.at("file").is_string() || !e.at("dtype").is_string()) throw bad("file or dtype", "must be a string");
  t.file = e.at("file").get<std::string>();
  if (t.file.empty() || t.file == "." || t.file == ".." || t.file.find('/') != std::string::npos)
    throw bad("file", "must name a shard beside the manifest, not '" + t.file + "'");
  try {
    t.offset = get_checked<std::int64_t>(e.at("offset"));
    t.bytes = get_checked<std::int64_t>(e.at("bytes"));
    t.shape = get_checked<std::vector<std::int64_t>>(e.at("shape"));
    t.crc32 = get_checked<std::uint32_t>(e.at("crc32"));
  } catch (const nlohmann::json::exception& error) {
    throw bad("offset, bytes, shape or crc32", std::string("is not what it must be: ") + error.what());
  }
  if (t.offset < 0 || t.bytes < 0 || t.offset > INT64_MAX - t.bytes) throw bad("offset or bytes", "is out of range");
  t.dtype = e.at("dtype").get<std::string>();
  const int item = dtype_bytes(t.dtype);
  if (!item) throw bad("dtype", "'" + t.dtype + "' is unknown");
  std::int64_t elements = 1;
  for (const auto d : t.shape) {
    if (d < 0) throw bad("shape", "has a negative dimension");
    if (d > 0 && elements > (std::int64_t{1} << 40) / d) throw bad("shape", "has more than 2^40 elements");
    elements *= d;
  }
  if (t.bytes != elements * item)
    throw bad("bytes", std::to_string(t.bytes) + " do not fit its shape and dtype (" + std::to_string(elements * item) +
                           ")");
  return t;
}

}  // namespace

Manifest parse_manifest(const nlohmann::json& j, const std::string& origin) {
  const std::string where = "checkpoint manifest " + origin;
  if (!j.is_object()) throw CheckpointError(where + " is not a JSON object (corrupt manifest)");
  if (!j.contains("format") || j.at("format") != kCheckpointFormat)
    throw CheckpointError(where + ": format is " + (j.contains("format") ? j.at("format").dump() : "missing") +
                          ", expected " + kCheckpointFormat);
  Manifest m;
  try {
    m.step = get_checked<std::int64_t>(j.at("step"));
  } catch (const nlohmann::json::exception&) {
    throw CheckpointError(where + ": 'step' is missing or not a whole number (corrupt manifest)");
  }
  if (m.step < 0) throw CheckpointError(where + ": 'step' " + std::to_string(m.step) + " is negative");
  if (!j.contains("tensors") || !j.at("tensors").is_object())
    throw CheckpointError(where + ": 'tensors' is missing or not an object (corrupt manifest)");
  for (const auto& [key, entry] : j.at("tensors").items())
    m.tensors.emplace(key, parse_entry(entry, where + ": tensor '" + key + "'"));
  return m;
}

}  // namespace trident::checkpoint
