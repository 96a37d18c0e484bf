#include "trident/schedule/schedule.h"

#include "trident/schedule/delayed.h"
#include "trident/schedule/simulator.h"
#include "zero_bubble.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace trident::schedule {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names{"gpipe", "1f1b", "graph-1f1b"};
  return names;
}

const std::vector<std::string>& zero_bubble_names() {
  static const std::vector<std::string> names{"zb-h1", "zb-h2", "graph-zb"};
  return names;
}

std::vector<std::string> all_schedule_names() {
  auto names = schedule_names();
  names.insert(names.end(), zero_bubble_names().begin(), zero_bubble_names().end());
  return names;
}

bool is_zero_bubble(const std::string& name) {
  return std::count(zero_bubble_names().begin(), zero_bubble_names().end(), name) > 0;
}

namespace {

// See Note [Zero-bubble schedules]: the limits from the peak memory of the
// schedule it keeps (the most any stage's device needs: its static bytes
// and the micro-batches it holds), each stage holding as many micro-batches
// as fit in that.
Schedule zero_bubble(const std::string& name, const StageGraph& graph, const std::vector<int>& counts) {
  const Schedule base = make_schedule(name == "graph-zb" ? "graph-1f1b" : "1f1b", graph, counts);
  const auto held = validate(graph, base).in_flight;
  const bool sized = std::any_of(graph.stages.begin(), graph.stages.end(), [](const StageCost& c) { return c.activation_bytes > 0; });
  auto bytes = [&](StageId st) { return sized ? graph.stages[st].activation_bytes : 1.0; };
  auto fixed = [&](StageId st) { return sized ? graph.stages[st].static_bytes : 0.0; };
  double peak = 0;
  for (StageId st = 0; st < graph.size(); ++st) peak = std::max(peak, fixed(st) + held[st] * bytes(st));
  std::vector<int> limits(graph.size());
  for (StageId st = 0; st < graph.size(); ++st) {
    const double fit = bytes(st) > 0 ? std::floor((peak - fixed(st)) / bytes(st) * (1 + 1e-12)) : counts[st];
    limits[st] = static_cast<int>(std::clamp<double>(fit, held[st], counts[st]));
    if (name == "zb-h2") limits[st] = std::min(2 * limits[st] - 1, counts[st]);
  }
  // Candidates, the fastest simulated kept: the list schedule with and
  // without W lookahead, and the kept schedule with each W right after its B
  // (never slower than it: B's gradients leave a W earlier).
  const int most = *std::max_element(counts.begin(), counts.end());
  // zb-h1 and zb-h2 are chain schedules, as the zero-bubble paper's: made on
  // the stages in topological order as a chain (what a user who linearises
  // the model gets), then run on the DAG; graph-zb is made on the DAG.
  StageGraph made = graph;
  if (name != "graph-zb") {
    const auto order = graph.topo_order();
    made.edges.clear();
    for (std::size_t i = 1; i < order.size(); ++i) made.edges.push_back({order[i - 1], order[i]});
  }
  std::vector<Schedule> candidates;
  for (bool lookahead : {true, false})
    candidates.push_back({name, most, detail::list_schedule(made, counts, limits, lookahead), counts});
  Schedule after{name, most, base.stages, counts};
  for (auto& list : after.stages) list = weights_after_backwards(list);
  candidates.push_back(std::move(after));
  std::size_t best = 0;
  double best_s = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const double t = simulate(graph, candidates[i], most).iteration_s;  // validates
    if (i == 0 || t < best_s * (1 - 1e-12)) best = i, best_s = t;
  }
  return candidates[best];
}

}  // namespace

Schedule make_schedule(const std::string& name, const StageGraph& graph, int micro_batches) {
  graph.check();
  if (micro_batches < 1) throw ScheduleError("micro_batches must be >= 1, got " + std::to_string(micro_batches));
  auto s = make_schedule(name, graph, std::vector<int>(graph.size(), micro_batches));
  s.counts.clear();
  return s;
}

Schedule make_schedule(const std::string& name, const StageGraph& graph, const std::vector<int>& counts) {
  graph.check();
  if (static_cast<int>(counts.size()) != graph.size())
    throw ScheduleError("schedule '" + name + "': " + std::to_string(counts.size()) + " micro-batch counts for " +
                        std::to_string(graph.size()) + " stages");
  // Rows in units of the finest micro-batch of a common multiple L of the
  // counts: a stage of n micro-batches has L / n units each.
  long lcm = 1;
  for (int n : counts) {
    if (n < 1) throw ScheduleError("schedule '" + name + "': micro-batch counts must be >= 1, got " + std::to_string(n));
    lcm = std::lcm(lcm, static_cast<long>(n));
  }
  auto size = [&](StageId st) { return lcm / counts[st]; };
  // A stage forwards `first` rows before its first backward: at least what
  // each successor forwards before its own (else the two wait for each
  // other), and at least one of its micro-batches more than the stages
  // after it hold (1F1B's warm-up); rounded up to its micro-batches, which
  // `first` then holds.
  auto actions = [&](StageId st, long& first) {
    const int forwards = static_cast<int>(std::min<long>((first + size(st) - 1) / size(st), counts[st]));
    first = forwards * size(st);
    return one_f_one_b(forwards - 1, counts[st]);
  };
  const auto order = graph.topo_order();
  const auto succ = graph.successors();
  std::vector<long> first(graph.size(), 0);
  Schedule s{name, *std::max_element(counts.begin(), counts.end()), std::vector<StageActions>(graph.size()), counts};
  if (name == "gpipe") {
    for (StageId st = 0; st < graph.size(); ++st) s.stages[st] = one_f_one_b(counts[st], counts[st]);
  } else if (name == "1f1b") {
    long later = 0;  // what the next stage in topological order forwards first
    for (int i = graph.size() - 1; i >= 0; --i) {
      const StageId st = order[i];
      first[st] = later + size(st);
      for (StageId t : succ[st]) first[st] = std::max(first[st], first[t]);
      s.stages[st] = actions(st, first[st]);
      later = first[st];
    }
  } else if (name == "graph-1f1b") {
    std::vector<long> below(graph.size(), 0);  // the most rows on a path from a successor to a sink
    for (int i = graph.size() - 1; i >= 0; --i) {
      const StageId st = order[i];
      for (StageId t : succ[st]) below[st] = std::max(below[st], below[t] + size(t));
      first[st] = below[st] + size(st);
      for (StageId t : succ[st]) first[st] = std::max(first[st], first[t]);
      s.stages[st] = actions(st, first[st]);
    }
  } else if (is_zero_bubble(name)) {
    return zero_bubble(name, graph, counts);
  } else {
    throw ScheduleError("schedule '" + name + "' is unknown; use gpipe, 1f1b, graph-1f1b, zb-h1, zb-h2 or graph-zb");
  }
  return s;
}

std::string to_string(const Action& a) {
  switch (a.kind) {
    case Action::Kind::kForward: return "F" + std::to_string(a.micro_batch);
    case Action::Kind::kBackward: return "B" + std::to_string(a.micro_batch);
    case Action::Kind::kWeight: return "W" + std::to_string(a.micro_batch);
    case Action::Kind::kStep: return "S";
  }
  return "?";
}

StageActions weights_after_backwards(const StageActions& list) {
  StageActions split;
  for (const auto& a : list) {
    split.push_back(a);
    if (a.kind == Action::Kind::kBackward) split.push_back({Action::Kind::kWeight, a.micro_batch});
  }
  return split;
}

bool splits_backward(const StageActions& list) {
  return std::any_of(list.begin(), list.end(), [](const Action& a) { return a.kind == Action::Kind::kWeight; });
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
    if (word == "S") {
      out.push_back({Action::Kind::kStep, 0});
      continue;
    }
    bool ok = word.size() >= 2 && (word[0] == 'F' || word[0] == 'B' || word[0] == 'W') &&
              std::all_of(word.begin() + 1, word.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              word.size() < 10;
    if (!ok)
      throw ScheduleError("action '" + word + "' is not F<micro-batch>, B<micro-batch>, W<micro-batch> or S (e.g. F0 B0 W0 S)");
    const auto kind = word[0] == 'F' ? Action::Kind::kForward : word[0] == 'B' ? Action::Kind::kBackward : Action::Kind::kWeight;
    out.push_back({kind, std::stoi(word.substr(1))});
  }
  return out;
}

}  // namespace trident::schedule
