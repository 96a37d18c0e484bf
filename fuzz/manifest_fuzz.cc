// A checkpoint manifest (manifest.json of runs/NAME/checkpoints/step-N):
// read, then checked entry by entry, as CheckpointReader::open does before
// any tensor is allocated or read.
#include "fuzz.h"
#include "trident/base/files.h"
#include "trident/checkpoint/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = trident::fuzz::input_file(data, size, ".manifest.json");
  trident::fuzz::expect_clear_error([&] {
    using trident::checkpoint::CheckpointError;
    trident::checkpoint::parse_manifest(trident::read_json_file<CheckpointError>(path, "checkpoint manifest"), path);
  });
  return 0;
}
