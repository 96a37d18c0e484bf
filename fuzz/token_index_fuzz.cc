// A Megatron .idx beside a token .bin (data: {name: tokens}): the first 8
// bytes are the .bin's length (little-endian), the rest the .idx, checked
// as formats::open_token_file does before mapping the ids.
#include <cstring>

#include "fuzz.h"
#include "trident/formats/token_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint64_t bin = 0;
  std::memcpy(&bin, data, 8);
  trident::fuzz::expect_clear_error(
      [&] { trident::formats::parse_megatron_idx(trident::fuzz::text_of(data + 8, size - 8), bin, "x.idx"); });
  return 0;
}
