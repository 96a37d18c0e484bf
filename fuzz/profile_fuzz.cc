// A profile file (`trident profile` writes it; a cluster or `--profile`
// names it): read, then turned into the cost model of the zoo model it
// describes, as the planner does.
#include "fuzz.h"
#include "trident/cost/cost_model.h"
#include "trident/zoo/zoo.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = trident::fuzz::input_file(data, size, ".profile.json");
  trident::fuzz::expect_clear_error([&] {
    const auto profile = trident::cost::load_profile(path);
    const auto graph = trident::zoo::build_graph({profile.model, profile.preset});
    trident::cost::profiled_cost_model(profile, graph, path);
  });
  return 0;
}
