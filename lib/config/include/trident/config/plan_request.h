// From a training config to a plan request: the one translation that
// `trident train`, `trident plan` (its flags fill a config), the emulator and
// the tests share. Torch-free.
//
// Note [Config to request]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The config only names what to plan; lib/planner makes the plan
// (Planner::make; see Note [Search spaces]). parallel.partitioner is a
// search (graphpipe, pipedream), data parallelism (dp), or a plan file (a
// path ending in .json), and on one device every partitioner is a plan of
// one stage (data parallelism over one device). parallel.micro_batch 0 means
// the mini-batch divided by train.accumulate for dp (K micro-batches of one
// stage accumulate their gradients and sync once: gradient accumulation is
// a plan like any other) and "searched" for the pipelines. Everything the memory and time models read
// comes from the config too: the optimizer's state count, staleness (the
// PS's server copy), threads, the bucket size, parallel.sync's overrides.
#pragma once

#include <optional>
#include <string>

#include "trident/config/config.h"
#include "trident/planner/planner.h"

namespace trident::config {

enum class PartitionerKind { kSearch, kDataParallel, kPlanFile };

// What a parallel.partitioner value names: graphpipe or pipedream (a
// search), dp, or a plan file (a path ending in .json); nullopt for
// anything else.
std::optional<PartitionerKind> partitioner_kind(const std::string& partitioner);

// What a run does with its config: on one device always kDataParallel; a
// value that names nothing is read as a plan file (the config check refuses
// it first).
PartitionerKind run_kind(const ParallelConfig& parallel);

// The plan request of a checked config (the plan file, if any, is read by
// the caller and handed to Planner::make). Throws PlanError for an optimizer
// whose state count is unknown.
planner::PlanRequest plan_request(const TrainConfig& config);

}  // namespace trident::config
