// See Note [Sharded checkpoints] in sharded_checkpoint.h.
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/base/json.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include "trident/base/files.h"
#include "trident/checkpoint/checkpoint.h"

namespace trident::checkpoint {
namespace fs = std::filesystem;
namespace {

const std::pair<const char*, torch::ScalarType> kDtypes[] = {
    {"float32", torch::kFloat32}, {"float64", torch::kFloat64}, {"float16", torch::kFloat16},
    {"bfloat16", torch::kBFloat16}, {"int64", torch::kInt64}, {"int32", torch::kInt32}};

std::string dtype_name(torch::ScalarType t) {
  for (const auto& [name, type] : kDtypes)
    if (type == t) return name;
  throw CheckpointError(std::string("checkpoint: tensors of dtype ") + c10::toString(t) + " cannot be saved", ErrorKind::kFailure);
}

torch::ScalarType dtype_of(const std::string& name, const std::string& where) {
  for (const auto& [n, type] : kDtypes)
    if (name == n) return type;
  throw CheckpointError(where + ": unknown dtype '" + name + "'");
}

std::uint32_t crc_of(const void* data, std::size_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes uInt lengths
    const auto n = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, n);
    p += n, bytes -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

// The steps of the complete checkpoints under run_dir, ascending.
std::vector<std::int64_t> complete_steps(const std::string& run_dir) {
  std::vector<std::int64_t> steps;
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return steps;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0 || !fs::exists(entry.path() / "manifest.json")) continue;
    try {
      std::size_t used = 0;
      const auto step = std::stoll(name.substr(5), &used);
      if (used == name.size() - 5) steps.push_back(step);
    } catch (const std::exception&) {
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

std::string partial_checkpoint_dir(const std::string& run_dir, std::int64_t step) {
  return (fs::path(run_dir) / "checkpoints" / (".step-" + std::to_string(step) + ".partial")).string();
}

std::string checkpoint_dir(const std::string& run_dir, std::int64_t step) {
  return (fs::path(run_dir) / "checkpoints" / ("step-" + std::to_string(step))).string();
}

nlohmann::json write_shard(const std::string& dir, const std::string& file, const NamedTensors& tensors) {
  const auto path = (fs::path(dir) / file).string();
  nlohmann::json entries = nlohmann::json::object();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw CheckpointError("cannot write checkpoint shard " + path + ": " + std::strerror(errno), ErrorKind::kFailure);
  std::int64_t offset = 0;
  for (const auto& [key, tensor] : tensors) {
    const auto t = tensor.detach().cpu().contiguous();
    const auto bytes = static_cast<std::int64_t>(t.numel() * t.element_size());
    out.write(static_cast<const char*>(t.data_ptr()), bytes);
    entries[key] = {{"file", file},         {"offset", offset},
                    {"bytes", bytes},       {"shape", t.sizes().vec()},
                    {"dtype", dtype_name(t.scalar_type())}, {"crc32", crc_of(t.data_ptr(), static_cast<std::size_t>(bytes))}};
    offset += bytes;
  }
  if (!out.flush()) throw CheckpointError("cannot write checkpoint shard " + path + ": disk full or I/O error", ErrorKind::kFailure);
  out.close();
  fsync_path(path, false);
  return entries;
}

void publish_checkpoint(const std::string& run_dir, std::int64_t step, nlohmann::json manifest, int keep) {
  const auto partial = partial_checkpoint_dir(run_dir, step), final_dir = checkpoint_dir(run_dir, step);
  manifest["format"] = kCheckpointFormat;
  manifest["step"] = step;
  try {
    write_file_atomic((fs::path(partial) / "manifest.json").string(), manifest.dump(1) + "\n");
  } catch (const std::exception& e) {
    throw CheckpointError(std::string("cannot write the checkpoint manifest: ") + e.what(), ErrorKind::kFailure);
  }
  fsync_path(partial, true);
  std::error_code ec;
  // A checkpoint of the same step (a resumed run saving again): set it aside
  // first, so that some complete checkpoint exists at every moment.
  const auto old = final_dir + ".old";
  fs::remove_all(old, ec);
  if (fs::exists(final_dir)) fs::rename(final_dir, old, ec);
  fs::rename(partial, final_dir, ec);
  if (ec) throw CheckpointError("cannot publish checkpoint " + final_dir + ": " + ec.message(), ErrorKind::kFailure);
  fsync_path((fs::path(run_dir) / "checkpoints").string(), true);
  fs::remove_all(old, ec);
  const auto steps = complete_steps(run_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(std::max(keep, 1)) < steps.size(); ++i)
    fs::remove_all(checkpoint_dir(run_dir, steps[i]), ec);
}

CheckpointReader CheckpointReader::latest(const std::string& run_dir) {
  const auto steps = complete_steps(run_dir);
  if (!steps.empty()) return open(checkpoint_dir(run_dir, steps.back()));
  const auto legacy = (fs::path(run_dir) / "checkpoint.pt").string();
  if (fs::exists(legacy)) return open(legacy);
  throw CheckpointError("no checkpoint in " + run_dir + " (neither checkpoints/step-N/manifest.json nor checkpoint.pt)");
}

CheckpointReader CheckpointReader::open(const std::string& path) {
  CheckpointReader r;
  r.path_ = path;
  if (fs::is_directory(path)) {
    const auto manifest = (fs::path(path) / "manifest.json").string();
    if (!fs::exists(manifest)) throw CheckpointError("checkpoint " + path + " has no manifest.json (incomplete)");
    r.manifest_ = read_json_file<CheckpointError>(manifest, "checkpoint manifest");
    r.entries_ = parse_manifest(r.manifest_, manifest);
    r.step_ = r.entries_.step;
    return r;
  }
  const Checkpoint ck = load_checkpoint(path);  // throws CheckpointError
  r.step_ = ck.step;
  r.manifest_ = ck.meta;
  r.legacy_ = std::make_shared<std::map<std::string, torch::Tensor>>();
  for (auto& [name, t] : ck.params) (*r.legacy_)["param/" + name] = t;
  for (auto& [name, slots] : ck.optimizer)
    for (auto& [slot, t] : slots) (*r.legacy_)["optim/" + name + "/" + slot] = t;
  return r;
}

bool CheckpointReader::has(const std::string& key) const {
  return legacy_ ? legacy_->count(key) > 0 : entries_.tensors.count(key) > 0;
}

std::vector<std::string> CheckpointReader::keys(const std::string& prefix) const {
  std::vector<std::string> out;
  if (legacy_) {
    for (const auto& [k, t] : *legacy_)
      if (k.rfind(prefix, 0) == 0) out.push_back(k);
  } else {
    for (const auto& [k, e] : entries_.tensors)
      if (k.rfind(prefix, 0) == 0) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

torch::Tensor CheckpointReader::read(const std::string& key) const {
  if (legacy_) {
    auto it = legacy_->find(key);
    if (it == legacy_->end()) throw CheckpointError("checkpoint " + path_ + " has no tensor '" + key + "'");
    return it->second;
  }
  const auto it = entries_.tensors.find(key);
  if (it == entries_.tensors.end()) throw CheckpointError("checkpoint " + path_ + " has no tensor '" + key + "'");
  const auto& e = it->second;  // checked by parse_manifest: its bytes fit its shape and dtype
  const auto file = (fs::path(path_) / e.file).string();
  const std::string where = "checkpoint " + path_ + ": tensor '" + key + "' in " + file;
  auto t = torch::empty(e.shape, dtype_of(e.dtype, where));
  const auto bytes = e.bytes;
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) throw CheckpointError(where + ": " + std::strerror(errno));
  auto* dst = static_cast<char*>(t.data_ptr());
  std::int64_t done = 0, offset = e.offset;
  while (done < bytes) {
    const auto n = ::pread(fd, dst + done, static_cast<std::size_t>(bytes - done), offset + done);
    if (n <= 0) {
      ::close(fd);
      throw CheckpointError(where + ": the file ends early (truncated)");
    }
    done += n;
  }
  ::close(fd);
  if (crc_of(dst, static_cast<std::size_t>(bytes)) != e.crc32)
    throw CheckpointError(where + ": CRC-32 mismatch (corrupt)");
  return t;
}

namespace {

std::vector<char> pickle_for_pytorch(const c10::IValue& value) {
  std::vector<char> pickled, out;
  torch::jit::Pickler pickler([&](const char* bytes, std::size_t n) { pickled.insert(pickled.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, std::size_t n) {
    out.insert(out.end(), static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return out;
}

}  // namespace

std::size_t export_weights(const CheckpointReader& checkpoint, const std::string& path) {
  c10::Dict<std::string, at::Tensor> weights;
  const std::string prefix = "param/";
  for (const auto& key : checkpoint.keys(prefix)) weights.insert(key.substr(prefix.size()), checkpoint.read(key));
  const auto bytes = pickle_for_pytorch(c10::IValue(weights));
  try {
    write_file_atomic(path, std::string(bytes.begin(), bytes.end()));
  } catch (const std::exception& e) {
    throw CheckpointError(std::string("export: ") + e.what(), ErrorKind::kFailure);
  }
  return weights.size();
}

}  // namespace trident::checkpoint
