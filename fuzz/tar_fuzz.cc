// A tar shard (data: {name: tar}): its 512-byte headers, GNU long names and
// pax records, as formats::index_tar reads them before any member's data.
#include "fuzz.h"
#include "trident/formats/tar.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  trident::fuzz::expect_clear_error([&] { trident::formats::index_tar_bytes(trident::fuzz::text_of(data, size), "x.tar"); });
  return 0;
}
