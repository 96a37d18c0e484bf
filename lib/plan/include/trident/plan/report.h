// Text summaries of a plan for people: what `trident plan` and `trident
// simulate` print. Torch-free, so tests can check them.
#pragma once

#include <string>

#include "trident/plan/planner.h"

namespace trident::plan {

// One line of totals, then one row per stage: ops (count, first .. last),
// devices, rows per device per micro-batch, in-flight micro-batches,
// parameters, activations held (in-flight x one micro-batch), peak memory per
// device against the limit, compute per micro-batch, and time per sample.
std::string stage_table(const Planner& planner, const Plan& plan);

// The gradient-sync choice for the largest parameters of stages with several
// devices: shape, predicted time of each method, and the one in the plan.
std::string sync_table(const Planner& planner, const Plan& plan, int max_rows = 12);

}  // namespace trident::plan
