// A Fashion-MNIST IDX file, decompressed: the first byte picks which of the
// two kinds trident reads (images: magic 2051, 28 x 28; labels: magic 2049),
// the rest is the file, checked as read_idx does before it copies the data.
#include <vector>

#include "fuzz.h"
#include "trident/formats/file_headers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool images = data[0] & 1;
  const std::vector<std::uint8_t> bytes(data + 1, data + size);
  trident::fuzz::expect_clear_error([&] {
    if (images) {
      trident::formats::check_idx(bytes, 2051, {0, 28, 28}, "images-idx3-ubyte");
    } else {
      trident::formats::check_idx(bytes, 2049, {0}, "labels-idx1-ubyte");
    }
  });
  return 0;
}
