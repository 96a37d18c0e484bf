// A cluster file (`parallel.cluster: my-cluster.yaml`, `trident plan
// --cluster`; the calibration trident writes is one too).
#include "fuzz.h"
#include "trident/cost/cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  trident::fuzz::expect_clear_error(
      [&] { trident::cost::parse_cluster(trident::fuzz::text_of(data, size), "fuzz.yaml"); });
  return 0;
}
