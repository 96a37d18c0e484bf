#include "trident/runtime/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace trident::runtime {
namespace {

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string temp_beside(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void publish(const std::string& tmp, const std::string& path) {
  fsync_path(tmp, false);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw std::runtime_error("cannot write " + path + ": " + ec.message());
  }
  auto dir = std::filesystem::path(path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string(), true);
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text) {
  const auto tmp = temp_beside(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path + ": cannot create " + tmp);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + path + ": disk full or I/O error");
  }
  publish(tmp, path);
}

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
  const auto tmp = temp_beside(path);
  try {
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    std::filesystem::remove(tmp);
    throw std::runtime_error("cannot write checkpoint " + path + ": " + e.what_without_backtrace());
  }
  publish(tmp, path);
}

Checkpoint load_checkpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error("checkpoint " + path + " does not exist");
  torch::serialize::InputArchive archive;
  Checkpoint ck;
  try {
    archive.load_from(path);
    c10::IValue meta_value;
    archive.read("meta", meta_value);
    ck.meta = nlohmann::json::parse(meta_value.toStringRef());
    ck.step = ck.meta.at("step").get<std::int64_t>();
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
    throw std::runtime_error("checkpoint " + path + " is unreadable: " + e.what());
  }
  return ck;
}

}  // namespace trident::runtime
