// Profiler: measures each op's forward and backward time at several row
// counts on this machine, for the planner's profiled cost model
// (cost::Profile, "trident-profile/1"; `trident profile`). Each op runs alone
// on inputs captured from a whole-graph forward of a random batch, so the
// times exclude the framework around it; the median of `repeats` runs is kept.
// Then each row count's times are scaled to the measured whole-graph forward
// and backward (see Note [Whole-graph normalisation] in profiler.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "trident/cost/cost_model.h"
#include "trident/zoo/zoo.h"

namespace trident::measure {

struct ProfileOptions {
  std::vector<std::int64_t> rows{1, 2, 4, 8};  // ascending, >= 1
  int repeats = 5;
  int threads = 1;
  graph::Precision precision = graph::Precision::kFp32;  // train.precision's policy (Note [Precision policy])
};

// Throws InputError for bad options (naming the value).
cost::Profile profile_model(const zoo::ModelSpec& model, const ProfileOptions& options);

// The median of timings (the upper middle of an even count; 0 when empty).
double median(std::vector<double> values);

}  // namespace trident::measure
