#include "trident/schedule/simulator.h"

#include <algorithm>

#include "walk.h"

namespace trident::schedule {

SimResult simulate(const StageGraph& g, const Schedule& s, int mini_batch) {
  const auto check = validate(g, s);
  const int n = g.size(), m = s.micro_batches;
  std::vector<std::vector<int>> in_edges(n), out_edges(n);
  for (int e = 0; e < static_cast<int>(g.edges.size()); ++e) {
    out_edges[g.edges[e].from].push_back(e);
    in_edges[g.edges[e].to].push_back(e);
  }
  const std::size_t ne = g.edges.size();
  std::vector<std::vector<double>> arrive_f(ne, std::vector<double>(m, 0)), arrive_b = arrive_f;
  std::vector<double> chan_f(ne, 0), chan_b(ne, 0), free_at(n, 0), last_b_start(n, 0), last_b_end(n, 0);
  std::vector<std::vector<double>> fwd_end(n, std::vector<double>(m, 0));
  SimResult r;
  r.busy_s.assign(n, 0);
  auto send = [&](StageId st, int e, double ready, double seconds, std::vector<double>& chan,
                  std::vector<std::vector<double>>& arrive, int mb, const char* dir, StageId to) {
    const double start = std::max(ready, chan[e]);
    chan[e] = arrive[e][mb] = start + seconds;
    if (seconds > 0)
      r.events.push_back({st, SimEvent::Lane::kSend,
                          std::string("send ") + dir + std::to_string(mb) + " -> s" + std::to_string(to), mb, start,
                          start + seconds});
  };
  detail::Walk(g, s).run([&](StageId st, const Action& a) {
    const auto& cost = g.stages[st];
    const int mb = a.micro_batch;
    double ready = free_at[st];
    if (a.kind == Action::Kind::kForward) {
      for (int e : in_edges[st]) ready = std::max(ready, arrive_f[e][mb]);
      const double end = ready + cost.forward_s;
      fwd_end[st][mb] = free_at[st] = end;
      r.busy_s[st] += cost.forward_s;
      r.events.push_back({st, SimEvent::Lane::kCompute, to_string(a), mb, ready, end});
      for (int e : out_edges[st]) send(st, e, end, g.edges[e].forward_s, chan_f, arrive_f, mb, "F", g.edges[e].to);
    } else {
      ready = std::max(ready, fwd_end[st][mb]);
      for (int e : out_edges[st]) ready = std::max(ready, arrive_b[e][mb]);
      const double end = ready + cost.backward_s;
      free_at[st] = end;
      last_b_start[st] = ready, last_b_end[st] = end;
      r.busy_s[st] += cost.backward_s;
      r.events.push_back({st, SimEvent::Lane::kCompute, to_string(a), mb, ready, end});
      for (int e : in_edges[st]) send(st, e, end, g.edges[e].backward_s, chan_b, arrive_b, mb, "B", g.edges[e].from);
    }
  });
  double iteration = 0;
  for (StageId st = 0; st < n; ++st) {
    double finish = free_at[st], chan = 0;
    for (const auto& task : g.stages[st].sync) {
      const double ready = last_b_start[st] + task.ready_fraction * (last_b_end[st] - last_b_start[st]);
      const double start = std::max(ready, chan);
      chan = start + task.seconds;
      if (task.seconds > 0) r.events.push_back({st, SimEvent::Lane::kSync, "sync " + task.name, -1, start, chan});
      finish = std::max(finish, chan);
    }
    for (int e : out_edges[st]) finish = std::max(finish, chan_f[e]);
    for (int e : in_edges[st]) finish = std::max(finish, chan_b[e]);
    iteration = std::max(iteration, finish);
  }
  r.iteration_s = iteration;
  r.samples_per_s = iteration > 0 ? mini_batch / iteration : 0;
  r.depth = g.depth();
  r.in_flight = check.in_flight;
  double busy = 0, devices = 0;
  for (StageId st = 0; st < n; ++st) {
    const auto& c = g.stages[st];
    r.utilisation.push_back(iteration > 0 ? r.busy_s[st] / iteration : 0);
    r.peak_memory_bytes.push_back(c.static_bytes + check.in_flight[st] * c.activation_bytes);
    busy += r.busy_s[st] * c.replicas;
    devices += c.replicas;
  }
  r.bubble_fraction = iteration > 0 ? 1 - busy / (iteration * devices) : 0;
  return r;
}

nlohmann::json chrome_trace(const StageGraph& g, const SimResult& r) {
  auto events = nlohmann::json::array();
  static const char* lanes[] = {"compute", "send", "gradient sync"};
  for (StageId st = 0; st < g.size(); ++st) {
    const auto& c = g.stages[st];
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", st},
                      {"args", {{"name", "stage " + std::to_string(st) + " " + c.name + " (x" +
                                                 std::to_string(c.replicas) + ")"}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", st}, {"args", {{"sort_index", st}}}});
    for (int lane = 0; lane < 3; ++lane)
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", st}, {"tid", lane}, {"args", {{"name", lanes[lane]}}}});
  }
  for (const auto& e : r.events) {
    nlohmann::json ev{{"name", e.name},
                      {"ph", "X"},
                      {"pid", e.stage},
                      {"tid", static_cast<int>(e.lane)},
                      {"ts", e.start * 1e6},
                      {"dur", (e.end - e.start) * 1e6}};
    if (e.micro_batch >= 0) ev["args"] = {{"micro_batch", e.micro_batch}};
    events.push_back(std::move(ev));
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace trident::schedule
