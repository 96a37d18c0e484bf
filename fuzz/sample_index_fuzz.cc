// A cached sample index (formats/sample_index.h): a damaged or stale cache
// file must be refused with a DataError (and is then rebuilt), never trusted.
#include "fuzz.h"
#include "trident/formats/sample_index.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  trident::fuzz::expect_clear_error([&] {
    const auto index = trident::formats::parse_index(trident::fuzz::text_of(data, size), "index.txt");
    trident::formats::write_index(index);
    index.num_classes();
  });
  return 0;
}
