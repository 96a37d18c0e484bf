// A plan file (`parallel.partitioner: my.plan.json`, `trident simulate
// --plan`): read, then checked against the zoo model it names, as the
// trainer does before running it.
#include "fuzz.h"
#include "trident/plan/plan.h"
#include "trident/zoo/zoo.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = trident::fuzz::input_file(data, size, ".plan.json");
  trident::fuzz::expect_clear_error([&] {
    auto plan = trident::plan::load_plan(path);
    const auto graph = trident::zoo::build_graph({plan.model, plan.preset});
    trident::plan::validate_plan(plan, graph);
  });
  return 0;
}
