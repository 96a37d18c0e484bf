// Text summaries and pictures of a plan for people: what `trident plan` and `trident
// simulate` print, and a run shows at its start. Torch-free, so tests can
// check them.
#pragma once

#include <string>

#include "trident/planner/planner.h"

namespace trident::report {

// One line of totals, then one row per stage: ops (count, first .. last),
// devices, rows per device per micro-batch, in-flight micro-batches,
// parameters, activations held (in-flight x one micro-batch), peak memory per
// device against the limit, compute per micro-batch, and time per sample.
std::string stage_table(const planner::Planner& planner, const plan::Plan& plan);

// The gradient-sync choice for the largest parameters of stages with several
// devices: shape, predicted time of each method, and the one in the plan.
std::string sync_table(const planner::Planner& planner, const plan::Plan& plan, int max_rows = 12);

// Two plans of one model beside each other, for a run that continues under
// another plan than its checkpoint's (elastic re-planning): a title line,
// partitioner, devices and micro-batches, then per stage its ops (count,
// first .. last), devices and micro-batch. Needs no planner: it shows what
// the plans say, not predictions.
std::string side_by_side(const plan::Plan& before, const std::string& before_title, const plan::Plan& after,
                         const std::string& after_title);

// Graphviz DOT of the stage graph: one box per stage (ops, devices), edges
// labelled with the tensors that cross them (`trident plan --dot`, a run's
// stages.dot). Reads the plan as written: it need not be validated.
std::string to_dot(const plan::Plan& plan);

// "8 micro-batches of 16", or "micro-batches of 32, 16, 8, 32 by stage"
// (see Note [Micro-batch ratios]), for banners and tables.
std::string micro_batch_summary(const plan::Plan& plan);

}  // namespace trident::report
