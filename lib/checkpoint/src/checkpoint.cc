#include "trident/checkpoint/checkpoint.h"
#include "trident/base/json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "trident/base/files.h"
#include "trident/checkpoint/sharded_checkpoint.h"

namespace trident::checkpoint {

void save_checkpoint(const std::string& path, const Checkpoint& ck) {
  torch::serialize::OutputArchive archive;
  nlohmann::json meta = ck.meta;
  meta["format"] = "trident-checkpoint/1";
  meta["step"] = ck.step;
  meta["params"] = nlohmann::json::array();
  meta["optimizer"] = nlohmann::json::object();
  for (const auto& [name, t] : ck.params) {
    archive.write("param/" + name, t.detach());
    meta["params"].push_back(name);
  }
  for (const auto& [name, slots] : ck.optimizer) {
    for (const auto& [slot, t] : slots) {
      archive.write("optim/" + name + "/" + slot, t);
      meta["optimizer"][name].push_back(slot);
    }
  }
  archive.write("meta", c10::IValue(meta.dump()));
  const auto tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    archive.save_to(tmp);
    fsync_path(tmp, false);
    std::filesystem::rename(tmp, path);
  } catch (const std::exception& e) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw CheckpointError("cannot write checkpoint " + path + ": " + first_line(e), ErrorKind::kFailure);
  }
  const auto dir = std::filesystem::path(path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), true);
}

Checkpoint load_checkpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) throw CheckpointError("checkpoint " + path + " does not exist");
  torch::serialize::InputArchive archive;
  Checkpoint ck;
  try {
    archive.load_from(path);
    c10::IValue meta_value;
    archive.read("meta", meta_value);
    ck.meta = nlohmann::json::parse(meta_value.toStringRef());
    ck.step = get_checked<std::int64_t>(ck.meta.at("step"));
    for (const auto& name : ck.meta.at("params")) {
      torch::Tensor t;
      archive.read("param/" + name.get<std::string>(), t);
      ck.params[name] = t;
    }
    for (const auto& [name, slots] : ck.meta.at("optimizer").items()) {
      for (const auto& slot : slots) {
        torch::Tensor t;
        archive.read("optim/" + name + "/" + slot.get<std::string>(), t);
        ck.optimizer[name][slot] = t;
      }
    }
  } catch (const std::exception& e) {
    throw CheckpointError("checkpoint " + path + " is unreadable: " + first_line(e));
  }
  return ck;
}

}  // namespace trident::checkpoint
