// A .npy file (the user's own data: data: {name: npy, ...}): its header
// parsed and checked against the file's length, as parse_npy does before it
// allocates the array.
#include "fuzz.h"
#include "trident/formats/file_headers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  trident::fuzz::expect_clear_error([&] { trident::formats::parse_npy_header(trident::fuzz::text_of(data, size), "x.npy"); });
  return 0;
}
