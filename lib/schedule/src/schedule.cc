#include "trident/schedule/schedule.h"

#include <algorithm>
#include <sstream>

namespace trident::schedule {
namespace {

// Warm-up w forwards, then one forward / one backward, then the remaining
// backwards; w = m gives GPipe's order.
StageActions one_f_one_b(int warmup, int m) {
  warmup = std::clamp(warmup, 0, m);
  StageActions a;
  for (int i = 0; i < warmup; ++i) a.push_back({Action::Kind::kForward, i});
  for (int i = 0; i < m - warmup; ++i) {
    a.push_back({Action::Kind::kForward, warmup + i});
    a.push_back({Action::Kind::kBackward, i});
  }
  for (int i = m - warmup; i < m; ++i) a.push_back({Action::Kind::kBackward, i});
  return a;
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"gpipe", "1f1b", "graph-1f1b"};
  return names;
}

Schedule make_schedule(const std::string& name, const StageGraph& graph, int micro_batches) {
  graph.check();
  if (micro_batches < 1) throw ScheduleError("micro_batches must be >= 1, got " + std::to_string(micro_batches));
  Schedule s{name, micro_batches, std::vector<StageActions>(graph.size())};
  if (name == "gpipe") {
    for (auto& a : s.stages) a = one_f_one_b(micro_batches, micro_batches);
  } else if (name == "1f1b") {
    const auto order = graph.topo_order();
    for (int i = 0; i < graph.size(); ++i) s.stages[order[i]] = one_f_one_b(graph.size() - 1 - i, micro_batches);
  } else if (name == "graph-1f1b") {
    const auto h = graph.heights();
    for (StageId st = 0; st < graph.size(); ++st) s.stages[st] = one_f_one_b(h[st] - 1, micro_batches);
  } else {
    throw ScheduleError("schedule '" + name + "' is unknown; use gpipe, 1f1b or graph-1f1b");
  }
  return s;
}

std::string to_string(const Action& a) {
  return (a.kind == Action::Kind::kForward ? "F" : "B") + std::to_string(a.micro_batch);
}

std::string to_string(const StageActions& list) {
  std::string s;
  for (const auto& a : list) s += (s.empty() ? "" : " ") + to_string(a);
  return s;
}

StageActions parse_actions(const std::string& text) {
  std::istringstream in(text);
  StageActions out;
  for (std::string word; in >> word;) {
    bool ok = word.size() >= 2 && (word[0] == 'F' || word[0] == 'B') &&
              std::all_of(word.begin() + 1, word.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              word.size() < 10;
    if (!ok) throw ScheduleError("action '" + word + "' is not F<micro-batch> or B<micro-batch> (e.g. F0 B0)");
    out.push_back({word[0] == 'F' ? Action::Kind::kForward : Action::Kind::kBackward, std::stoi(word.substr(1))});
  }
  return out;
}

}  // namespace trident::schedule
