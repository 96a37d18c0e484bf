#include "trident/report/report.h"
#include "trident/base/json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/report/plan_tables.h"

namespace trident::report {
namespace {

std::string fmt(const char* f, double v) { return format_number(f, v); }

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

struct Span {
  std::string name, cat;
  int pid = 0, tid = 0;
  double ts = 0, dur = 0;  // µs
};

std::vector<Span> spans(const nlohmann::json& trace) {
  std::vector<Span> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "X")
      out.push_back({e.value("name", ""), e.value("cat", ""), value_checked(e, "pid", 0), value_checked(e, "tid", 0),
                     e.value("ts", 0.0), e.value("dur", 0.0)});
  return out;
}

std::map<int, std::string> rank_labels(const nlohmann::json& trace) {
  std::map<int, std::string> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name")
      out[value_checked(e, "pid", 0)] = e.at("args").value("name", "");
  return out;
}

const char* colour(const std::string& cat) {
  if (cat == "forward") return "#4e79a7";
  if (cat == "backward") return "#59a14f";
  if (cat == "weight") return "#b07aa1";  // W of a split backward (Note [Split backward])
  if (cat == "wait") return "#e15759";
  if (cat == "sync") return "#f28e2b";
  if (cat == "optimizer") return "#9c9c9c";
  return "#cccccc";
}

}  // namespace

nlohmann::json read_json(const std::string& path) {
  return read_json_file<ReportError>(path, "run file");
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ReportError(path + ": cannot read the file");
  std::vector<nlohmann::json> out;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      throw ReportError(path + ": line " + std::to_string(n) + " is not valid JSON");
    }
  }
  return out;
}

Summary summarize(const nlohmann::json& trace, const std::vector<nlohmann::json>& metrics) {
  Summary s;
  const auto all = spans(trace);
  std::set<int> ranks;
  double step_total = 0, busy = 0, waited = 0;
  for (const auto& sp : all) {
    ranks.insert(sp.pid);
    if (sp.cat == "step" && sp.pid == 0) step_total += sp.dur, ++s.steps;
    if (sp.cat == "forward" || sp.cat == "backward" || sp.cat == "weight") busy += sp.dur;
    if (sp.cat == "wait") waited += sp.dur;
  }
  s.ranks = static_cast<int>(ranks.size());
  if (s.steps == 0 || s.ranks == 0) throw ReportError("trace.json holds no step spans; was it written by `trident train`?");
  const auto& meta = trace.value("metadata", nlohmann::json::object());
  s.mini_batch = value_checked(meta, "mini_batch", 0);
  s.iteration_s = step_total / s.steps / 1e6;
  s.bubble_fraction = std::max(0.0, 1 - busy / (s.ranks * step_total));
  s.exposed_comm_s = waited / s.steps / s.ranks / 1e6;
  s.samples_per_s = s.mini_batch / s.iteration_s;
  if (meta.contains("plan")) {
    const auto& pr = meta["plan"].value("predicted", nlohmann::json::object());
    if (pr.contains("iteration_s")) s.predicted_iteration_s = pr["iteration_s"].get<double>();
    if (pr.contains("samples_per_s")) s.predicted_samples_per_s = pr["samples_per_s"].get<double>();
    if (pr.contains("bubble_fraction")) s.predicted_bubble_fraction = pr["bubble_fraction"].get<double>();
  }
  for (const auto& m : metrics)
    if (m.contains("test_accuracy")) s.test_accuracy = m["test_accuracy"].get<double>();
  double wait = 0, rate = 0;
  int waits = 0, rates = 0;
  for (const auto& m : metrics) {
    if (m.contains("data_wait_s") && m["data_wait_s"].is_number()) wait += m["data_wait_s"].get<double>(), ++waits;
    if (m.contains("data_samples_per_worker_s") && m["data_samples_per_worker_s"].is_number())
      rate += m["data_samples_per_worker_s"].get<double>(), ++rates;
    if (m.contains("bad_samples") && m["bad_samples"].is_number()) s.bad_samples += m["bad_samples"].get<double>();
  }
  if (waits) s.data_wait_s = wait / waits;
  if (rates) s.data_samples_per_worker_s = rate / rates;
  const nlohmann::json* memory = nullptr;  // the last memory line
  for (const auto& m : metrics)
    if (m.contains("memory")) memory = &m["memory"];
  if (memory) {
    std::map<int, StageMemory> by_stage;
    for (const auto& r : *memory) {
      auto& sm = by_stage[get_checked<int>(r.at("stage"))];
      sm.stage = get_checked<int>(r.at("stage"));
      sm.ranks.push_back(get_checked<int>(r.at("rank")));
      sm.peak_rss_bytes = std::max(sm.peak_rss_bytes, r.at("peak_rss_bytes").get<double>());
      if (r.contains("peak_gpu_bytes"))
        sm.peak_gpu_bytes = std::max(sm.peak_gpu_bytes.value_or(0), r["peak_gpu_bytes"].get<double>());
      sm.planned_bytes = r.at("planned_bytes").get<double>();
    }
    for (auto& [stage, sm] : by_stage) s.memory.push_back(std::move(sm));
  }
  return s;
}

std::string summary_text(const Summary& s) {
  std::ostringstream o;
  auto row = [&](const std::string& what, const std::string& measured, const std::string& predicted) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-24s %14s %14s\n", what.c_str(), measured.c_str(), predicted.c_str());
    o << buf;
  };
  o << "run: " << s.ranks << " ranks, " << s.steps << " traced steps of " << s.mini_batch << " samples\n";
  row("", "measured", "simulated");
  auto pred = [](const std::optional<double>& v, const char* f, double scale) {
    return v ? fmt(f, *v * scale) : std::string("-");
  };
  row("iteration", fmt("%.2f ms", s.iteration_s * 1e3), pred(s.predicted_iteration_s, "%.2f ms", 1e3));
  row("samples/s", fmt("%.1f", s.samples_per_s), pred(s.predicted_samples_per_s, "%.1f", 1));
  row("bubble", fmt("%.1f%%", 100 * s.bubble_fraction), pred(s.predicted_bubble_fraction, "%.1f%%", 100));
  row("exposed comm / rank", fmt("%.2f ms", s.exposed_comm_s * 1e3), "-");
  if (s.data_wait_s) {
    row("data wait / step", fmt("%.2f ms", *s.data_wait_s * 1e3), "-");
    if (*s.data_wait_s > 0.1 * s.iteration_s)
      o << "  the loader bounds the step: rank 0 waited " << fmt("%.0f%%", 100 * *s.data_wait_s / s.iteration_s)
        << " of an iteration for its batch; raise data.workers or lower the decode cost (docs/data.md)\n";
  }
  if (s.data_samples_per_worker_s)
    o << "  loader: " << fmt("%.0f", *s.data_samples_per_worker_s) << " samples/s per worker thread\n";
  if (s.bad_samples > 0) o << "  bad samples replaced: " << fmt("%.0f", s.bad_samples) << "\n";
  if (s.test_accuracy) o << "  test accuracy " << fmt("%.2f%%", 100 * *s.test_accuracy) << "\n";
  if (!s.memory.empty()) {
    // On GPUs the plan's bytes live on the device: its peak is the measure.
    const bool gpu = s.memory.front().peak_gpu_bytes.has_value();
    row("memory per process", gpu ? "peak on GPU" : "peak RSS", "planned");
    for (const auto& m : s.memory) {
      std::string ranks;
      for (int r : m.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      const double peak = gpu ? m.peak_gpu_bytes.value_or(0) : m.peak_rss_bytes;
      row((m.stage < 0 ? "idle" : "stage " + std::to_string(m.stage)) + " (rank " + ranks + ")",
          fmt("%.1f MiB", peak / (1 << 20)), fmt("%.1f MiB", m.planned_bytes / (1 << 20)));
    }
  }
  return o.str();
}

std::string timeline_svg(const nlohmann::json& trace, int steps) {
  auto all = spans(trace);
  const auto labels = rank_labels(trace);
  // The window: the last `steps` step spans of rank 0.
  std::vector<const Span*> step_spans;
  for (const auto& sp : all)
    if (sp.cat == "step" && sp.pid == 0) step_spans.push_back(&sp);
  if (step_spans.empty()) throw ReportError("trace.json holds no step spans");
  std::sort(step_spans.begin(), step_spans.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
  const auto first = step_spans[step_spans.size() - std::min<std::size_t>(step_spans.size(), steps)];
  const double t0 = first->ts, t1 = step_spans.back()->ts + step_spans.back()->dur;
  int ranks = 0;
  for (const auto& sp : all) ranks = std::max(ranks, sp.pid + 1);
  const double left = 170, width = 1000, lane_h = 16, row_h = 44, top = 30;
  const double height = top + ranks * row_h + 40;
  auto x = [&](double t) { return left + (t - t0) / (t1 - t0) * width; };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << left + width + 20 << "' height='" << height
    << "' font-family='sans-serif' font-size='11'>\n";
  o << "<text x='" << left << "' y='18'>last " << std::min<std::size_t>(step_spans.size(), steps)
    << " steps, " << fmt("%.1f ms", (t1 - t0) / 1e3)
    << " — forward (blue), backward (green), weight gradients W (purple), waiting (red), gradient sync (orange), optimizer (grey)</text>\n";
  for (int r = 0; r < ranks; ++r) {
    const double y = top + r * row_h;
    const auto it = labels.find(r);
    o << "<text x='4' y='" << y + lane_h - 3 << "'>" << escape(it == labels.end() ? "rank " + std::to_string(r) : it->second)
      << "</text>\n";
    o << "<rect x='" << left << "' y='" << y << "' width='" << width << "' height='" << 2 * lane_h + 2
      << "' fill='#f4f4f4'/>\n";
  }
  for (const auto& sp : all) {
    if (sp.cat == "step" || sp.ts + sp.dur < t0 || sp.ts > t1) continue;
    const double a = std::max(x(sp.ts), left), b = std::min(x(sp.ts + sp.dur), left + width);
    const double y = top + sp.pid * row_h + (sp.tid == 0 ? 0 : lane_h + 2);
    o << "<rect x='" << fmt("%.2f", a) << "' y='" << y << "' width='" << fmt("%.2f", std::max(b - a, 0.5))
      << "' height='" << lane_h << "' fill='" << colour(sp.cat) << "'><title>" << escape(sp.name) << " "
      << fmt("%.3f ms", sp.dur / 1e3) << "</title></rect>\n";
    if (b - a > 8 * static_cast<double>(sp.name.size()) * 0.7 && (sp.cat == "forward" || sp.cat == "backward" || sp.cat == "weight"))
      o << "<text x='" << fmt("%.2f", a + 2) << "' y='" << y + lane_h - 4 << "' fill='white'>" << escape(sp.name)
        << "</text>\n";
  }
  const double axis = top + ranks * row_h + 10;
  for (int i = 0; i <= 5; ++i) {
    const double t = t0 + (t1 - t0) * i / 5;
    o << "<text x='" << fmt("%.1f", x(t)) << "' y='" << axis + 12 << "' text-anchor='middle'>"
      << fmt("%.1f ms", (t - t0) / 1e3) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string loss_svg(const std::vector<nlohmann::json>& metrics) {
  std::vector<std::pair<double, double>> loss, acc;
  for (const auto& m : metrics) {
    if (m.contains("loss")) loss.emplace_back(m.value("step", 0.0), m["loss"].get<double>());
    if (m.contains("test_accuracy")) acc.emplace_back(m.value("step", 0.0), m["test_accuracy"].get<double>());
  }
  const double left = 60, width = 600, top = 30, height = 260;
  double max_step = 1, max_loss = 1e-9;
  for (auto& [s, l] : loss) max_step = std::max(max_step, s), max_loss = std::max(max_loss, l);
  for (auto& [s, a] : acc) max_step = std::max(max_step, s);
  auto x = [&](double s) { return left + s / max_step * width; };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << left + width + 60 << "' height='" << top + height + 40
    << "' font-family='sans-serif' font-size='11'>\n"
    << "<text x='" << left << "' y='18'>training loss (blue, left axis) and test accuracy (orange, right axis) by step</text>\n"
    << "<rect x='" << left << "' y='" << top << "' width='" << width << "' height='" << height
    << "' fill='none' stroke='#999'/>\n";
  auto line = [&](const std::vector<std::pair<double, double>>& pts, double top_value, const char* c) {
    if (pts.empty()) return;
    o << "<polyline fill='none' stroke='" << c << "' stroke-width='1.5' points='";
    for (auto& [s, v] : pts) o << fmt("%.1f", x(s)) << "," << fmt("%.1f", top + height - v / top_value * height) << " ";
    o << "'/>\n";
    for (auto& [s, v] : pts)
      if (pts.size() < 30)
        o << "<circle cx='" << fmt("%.1f", x(s)) << "' cy='" << fmt("%.1f", top + height - v / top_value * height)
          << "' r='2.5' fill='" << c << "'/>\n";
  };
  line(loss, max_loss, "#4e79a7");
  line(acc, 1.0, "#f28e2b");
  o << "<text x='" << left - 4 << "' y='" << top + 4 << "' text-anchor='end'>" << fmt("%.2f", max_loss) << "</text>\n"
    << "<text x='" << left - 4 << "' y='" << top + height << "' text-anchor='end'>0</text>\n"
    << "<text x='" << left + width + 4 << "' y='" << top + 4 << "'>100%</text>\n"
    << "<text x='" << left + width + 4 << "' y='" << top + height << "'>0%</text>\n"
    << "<text x='" << left + width << "' y='" << top + height + 16 << "' text-anchor='end'>step "
    << static_cast<long long>(max_step) << "</text>\n</svg>\n";
  return o.str();
}

nlohmann::json simulated_trace(const schedule::SimResult& r, const plan::Plan& plan) {
  auto events = nlohmann::json::array();
  for (const auto& st : plan.stages) {
    if (st.devices.empty()) continue;
    std::string ranks;
    for (int d : st.devices) ranks += (ranks.empty() ? "" : ",") + std::to_string(d);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", st.devices.front()},
                      {"args", {{"name", "stage " + std::to_string(st.id) + " (rank " + ranks + ")"}}}});
  }
  for (const auto& e : r.events) {
    if (e.stage < 0 || e.stage >= static_cast<int>(plan.stages.size()) || plan.stages[e.stage].devices.empty()) continue;
    using Lane = schedule::SimEvent::Lane;
    const char* cat = e.lane == Lane::kSync   ? "sync"
                      : e.lane == Lane::kSend ? "send"
                      : e.name == "optimizer" ? "optimizer"
                      : e.name.rfind("F", 0) == 0 ? "forward"
                      : e.name.rfind("W", 0) == 0 ? "weight"
                                                  : "backward";
    events.push_back({{"name", e.name}, {"cat", cat}, {"ph", "X"}, {"pid", plan.stages[e.stage].devices.front()},
                      {"tid", e.lane == Lane::kCompute ? 0 : 1}, {"ts", e.start * 1e6},
                      {"dur", (e.end - e.start) * 1e6}});
  }
  events.push_back({{"name", "iteration"}, {"cat", "step"}, {"ph", "X"}, {"pid", 0}, {"tid", 1}, {"ts", 0.0},
                    {"dur", r.iteration_s * 1e6}});
  return {{"traceEvents", events}};
}

std::string report_html(const Summary& s, const std::string& timeline, const std::string& loss,
                        const std::string& stages_svg, const std::string& simulated_timeline) {
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>trident report</title></head>"
    << "<body style='font-family:sans-serif'>\n<h1>trident run report</h1>\n<pre>" << escape(summary_text(s))
    << "</pre>\n<h2>Pipeline timeline (measured)</h2>\n" << timeline;
  if (!simulated_timeline.empty())
    o << "<h2>Pipeline timeline (simulated: one iteration as the planner predicted it)</h2>\n" << simulated_timeline;
  o << "<h2>Loss and accuracy</h2>\n" << loss;
  if (!stages_svg.empty()) o << "<h2>Stage graph</h2>\n" << stages_svg;
  o << "</body></html>\n";
  return o.str();
}

}  // namespace trident::report
