#include "trident/executor/trace.h"
#include "trident/base/json.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace trident::executor {

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void TraceLog::add_stamped(std::string name, std::string cat, std::int64_t start, std::int64_t end) {
  if (device)
    marked_.push_back({std::move(name), std::move(cat), start, end});
  else
    add_timed(std::move(name), std::move(cat), start, end);
}

void TraceLog::resolve() {
  if (!device) return;
  const auto at = device->times();
  for (auto& e : marked_)
    add_timed(std::move(e.name), std::move(e.cat), at.at(static_cast<std::size_t>(e.start)),
              at.at(static_cast<std::size_t>(e.end)));
  marked_.clear();
}

void TraceLog::add_timed(std::string name, std::string cat, std::int64_t start_us, std::int64_t end_us) {
  if (end_us <= start_us) return;  // an empty segment (a forward whose first op waited)
  if (cat == "wait")
    add_wait(std::move(name), start_us, end_us);
  else
    add(std::move(name), std::move(cat), kComputeLane, start_us, end_us);
}

nlohmann::json to_json(const std::vector<TraceEvent>& events) {
  auto out = nlohmann::json::array();
  for (const auto& e : events) out.push_back({e.name, e.cat, e.lane, e.ts_us, e.dur_us});
  return out;
}

std::vector<TraceEvent> events_from_json(const nlohmann::json& doc) {
  std::vector<TraceEvent> out;
  for (const auto& e : doc)
    out.push_back({e.at(0).get<std::string>(), e.at(1).get<std::string>(), get_checked<int>(e.at(2)),
                   get_checked<std::int64_t>(e.at(3)), get_checked<std::int64_t>(e.at(4))});
  return out;
}

nlohmann::json chrome_trace(const std::vector<std::vector<TraceEvent>>& ranks, const std::vector<std::string>& labels,
                            const nlohmann::json& meta) {
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const auto& r : ranks)
    for (const auto& e : r) origin = std::min(origin, e.ts_us);
  auto events = nlohmann::json::array();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::string label = r < labels.size() ? labels[r] : "rank " + std::to_string(r);
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", r}, {"tid", 0}, {"args", {{"name", label}}}});
    events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"tid", 0}, {"args", {{"sort_index", r}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", kComputeLane}, {"args", {{"name", "compute"}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", kCommLane}, {"args", {{"name", "communication"}}}});
    for (const auto& e : ranks[r])
      events.push_back({{"ph", "X"}, {"name", e.name}, {"cat", e.cat}, {"pid", r}, {"tid", e.lane},
                        {"ts", e.ts_us - origin}, {"dur", std::max<std::int64_t>(e.dur_us, 1)}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"metadata", meta}};
}

nlohmann::json merged_trace(const std::vector<std::string>& per_rank, const plan::Plan* plan, nlohmann::json meta) {
  std::vector<std::vector<TraceEvent>> ranks;
  std::vector<std::string> labels;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    ranks.push_back(events_from_json(nlohmann::json::parse(per_rank[r])));
    std::string label = "rank " + std::to_string(r);
    if (plan) {
      for (const auto& st : plan->stages)
        for (std::size_t j = 0; j < st.devices.size(); ++j)
          if (st.devices[j] == static_cast<int>(r))
            label += " · stage " + std::to_string(st.id) +
                     (st.devices.size() > 1 ? " replica " + std::to_string(j) : std::string());
    }
    labels.push_back(label);
  }
  if (plan) meta["plan"] = plan->to_json();
  meta["ranks"] = per_rank.size();
  return chrome_trace(ranks, labels, meta);
}

}  // namespace trident::executor
