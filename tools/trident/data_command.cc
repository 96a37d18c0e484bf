// `trident data inspect PATH`: what trident sees in a dataset — its kind,
// samples, classes, files, bytes — and, with --check, the first sample
// that does not decode.
#include "commands.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "trident/base/cache_dir.h"
#include "trident/base/error.h"
#include "trident/base/text.h"
#include "trident/formats/sample_index.h"
#include "trident/formats/token_files.h"
#include "trident/images/decode.h"

namespace trident::cli {
namespace {
namespace fs = std::filesystem;

struct InspectArgs {
  std::string path, kind = "auto";
  bool check = false;
};

// images (a folder of class folders), npy (a folder of .npy), tar (.tar or
// a brace pattern), tokens (.bin).
std::string kind_of(const InspectArgs& a) {
  if (a.kind != "auto") return a.kind;
  const auto& p = a.path;
  if (p.find('{') != std::string::npos || (p.size() > 4 && p.compare(p.size() - 4, 4, ".tar") == 0)) return "tar";
  if (p.size() > 4 && p.compare(p.size() - 4, 4, ".bin") == 0) return "tokens";
  if (fs::is_directory(p)) {
    for (const auto& e : fs::directory_iterator(p))
      if (e.path().extension() == ".npy") return "npy";
    return "images";
  }
  throw InputError("data inspect " + p + ": neither an image folder, .npy folder, tar shards (.tar, or a {..} "
                   "pattern) nor a token file (.bin); give --kind");
}

int inspect_tokens(const std::string& path) {
  const auto f = formats::open_token_file(path);
  std::cout << "kind: tokens (" << (f.documents ? "Megatron indexed dataset" : "nanoGPT uint16 ids") << ")\n"
            << "ids: " << f.tokens << " of " << f.item_bytes << " bytes" << (f.is_signed ? " (signed)" : "") << "\n";
  if (f.documents) std::cout << "documents: " << f.documents << "\n";
  std::cout << "samples: (ids - 1) / T for a model of T positions (docs/data.md)\n";
  return kExitOk;
}

int inspect_images(const std::string& kind, const InspectArgs& a) {
  bool rescanned = false;
  const auto index = formats::load_index(kind, a.path, cache_dir(), &rescanned);
  std::cout << "kind: " << (kind == "images" ? "image folder" : "tar shards") << " (" << index.root << ")\n"
            << "samples: " << index.samples.size() << "\n"
            << "classes: " << index.num_classes();
  if (!index.classes.empty()) {
    std::cout << " (";
    for (std::size_t c = 0; c < index.classes.size() && c < 10; ++c) std::cout << (c ? ", " : "") << index.classes[c];
    std::cout << (index.classes.size() > 10 ? ", ...)" : ")");
  }
  std::cout << "\nfiles: " << index.files.size() << ", encoded bytes: " << human_bytes(static_cast<double>(index.bytes()))
            << "\n";
  if (index.skipped) std::cout << "skipped: " << index.skipped << (kind == "tar" ? " members" : " files") << " that are no sample's image or label\n";
  std::cout << "index: " << (rescanned ? "scanned now and cached in " : "read from the cache in ") << cache_dir() << "/index\n";
  if (!a.check) {
    std::cout << "fields: label, and an image decoded to the model's [C, H, W] (--check decodes every sample)\n";
    return kExitOk;
  }
  for (std::size_t i = 0; i < index.samples.size(); ++i) {
    const auto& s = index.samples[i];
    std::string bytes(s.size, '\0');
    std::ifstream in(index.files[s.file], std::ios::binary);
    in.seekg(static_cast<std::streamoff>(s.offset)).read(bytes.data(), static_cast<std::streamsize>(s.size));
    const auto origin = "sample " + std::to_string(i) + " (" + index.files[s.file] + ")";
    if (!in) throw InputError(origin + ": cannot be read in full (" + std::to_string(s.size) + " bytes indexed)");
    const auto image = images::decode(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), 3, origin);
    if (i == 0) std::cout << "first image: " << image.height << "x" << image.width << "\n";
  }
  std::cout << "check: every sample decodes\n";
  return kExitOk;
}

int inspect(const InspectArgs& a) {
  const auto kind = kind_of(a);
  if (kind == "tokens") return inspect_tokens(a.path);
  if (kind == "images" || kind == "tar") return inspect_images(kind, a);
  std::cout << "kind: npy (" << a.path << "): one FIELD.npy per input field and label.npy, mapped when training\n";
  for (const auto& e : fs::directory_iterator(a.path))
    if (e.path().extension() == ".npy") std::cout << "field " << e.path().stem().string() << ": " << human_bytes(static_cast<double>(e.file_size())) << "\n";
  return kExitOk;
}

}  // namespace

Command add_data_command(CLI::App& app) {
  auto* c = app.add_subcommand("data", "datasets as trident sees them");
  c->require_subcommand(1);
  auto args = std::make_shared<InspectArgs>();
  auto* i = c->add_subcommand("inspect", "what trident sees in a dataset: samples, classes, files, bytes; --check "
                                          "decodes every image and names the first that fails");
  i->add_option("path", args->path, "an image folder, tar shards (a .tar or name-{000..009}.tar), a token .bin or "
                                    "a .npy folder")->required();
  i->add_option("--kind", args->kind, "images, tar, tokens or npy (default: from the path)")
      ->check(CLI::IsMember({"auto", "images", "tar", "tokens", "npy"}));
  i->add_flag("--check", args->check, "decode every image (the first that fails exits 2, naming it)");
  return {c, [args] { return inspect(*args); }};
}

}  // namespace trident::cli
