// Internal: the list scheduler behind the zero-bubble schedules (schedule.h).
#pragma once

#include <vector>

#include "trident/schedule/schedule.h"

namespace trident::schedule::detail {

// Every backward split (Note [Split backward]); stage s holds at most
// limits[s] micro-batches between F and W; see Note [Zero-bubble schedules].
// With `lookahead` a stage does not start a W during which its next B could
// arrive. Throws ScheduleError if no stage can act before all are done.
std::vector<StageActions> list_schedule(const StageGraph& graph, const std::vector<int>& counts,
                                        const std::vector<int>& limits, bool lookahead);

}  // namespace trident::schedule::detail
