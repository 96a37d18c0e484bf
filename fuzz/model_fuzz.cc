// A model file (`model.file`, written by tools/export): read and validated
// as a graph, as `trident train` and `trident plan` do first; then the
// sizes every planner and the trainer compute from it.
#include "fuzz.h"
#include "trident/zoo/zoo.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = trident::fuzz::input_file(data, size, ".graph.json");
  trident::fuzz::expect_clear_error([&] {
    const auto graph = trident::zoo::read_model_file(path);
    std::int64_t bytes = graph.param_bytes();
    for (const auto& op : graph.ops()) {
      bytes += op.output.bytes();
      for (const auto& in : op.inputs) bytes += in.expected.bytes();
    }
    if (bytes < 0) __builtin_trap();  // sizes are never negative
  });
  return 0;
}
