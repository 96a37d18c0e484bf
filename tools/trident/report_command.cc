// `trident report RUN_DIR`: the measured pipeline next to the simulator's
// prediction, a timeline SVG, the loss curve and the stage graph.
#include "commands.h"

#include "plans.h"
#include "trident/zoo/zoo.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "trident/plan/plan.h"
#include "trident/report/plan_tables.h"
#include "trident/report/report.h"
#include "trident/base/files.h"

namespace trident::cli {
namespace {

// Writes RUN_DIR/{timeline.svg, loss.svg, stages.dot, stages.svg (when
// Graphviz's `dot` is installed), report.html} and prints the summary.
// Throws report::ReportError naming a missing or malformed file.
int run_report(const std::string& run_dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(run_dir))
    throw report::ReportError("report: " + run_dir + " is not a directory (give a run directory such as runs/NAME)");
  const auto trace = report::read_json(run_dir + "/trace.json");
  std::vector<nlohmann::json> metrics;
  if (fs::exists(run_dir + "/metrics.jsonl")) metrics = report::read_jsonl(run_dir + "/metrics.jsonl");
  const auto summary = report::summarize(trace, metrics);
  const auto timeline = report::timeline_svg(trace);
  const auto loss = report::loss_svg(metrics);
  write_file_atomic(run_dir + "/timeline.svg", timeline);
  write_file_atomic(run_dir + "/loss.svg", loss);
  std::vector<std::string> written = {"timeline.svg", "loss.svg"};
  std::string stages_svg, simulated_svg;
  if (fs::exists(run_dir + "/plan.json")) {
    auto plan = plan::load_plan(run_dir + "/plan.json");
    if (!plan.cluster.is_null()) {
      const auto g = zoo::build_graph({plan.model, plan.preset, plan.model_file, "", plan.model_graph, plan.graph_chunks, plan.fanouts,
                                        plan.sample_replace, plan.hidden, plan.node_embedding});
      auto simulated = plan;
      const auto result = planner_for(simulated, g, run_dir + "/plan.json").predict(simulated);
      simulated_svg = report::timeline_svg(report::simulated_trace(result, simulated), 1);
      write_file_atomic(run_dir + "/timeline-simulated.svg", simulated_svg);
      written.push_back("timeline-simulated.svg");
    }
    write_file_atomic(run_dir + "/stages.dot", report::to_dot(plan));
    written.push_back("stages.dot");
    const std::string cmd = "dot -Tsvg '" + run_dir + "/stages.dot' -o '" + run_dir + "/stages.svg' 2>/dev/null";
    if (std::system("command -v dot >/dev/null 2>&1") == 0 && std::system(cmd.c_str()) == 0) {
      std::ifstream in(run_dir + "/stages.svg");
      std::stringstream text;
      text << in.rdbuf();
      stages_svg = text.str();
      const auto svg_start = stages_svg.find("<svg");
      if (svg_start != std::string::npos) stages_svg = stages_svg.substr(svg_start);
      written.push_back("stages.svg");
    }
  }
  write_file_atomic(run_dir + "/report.html", report::report_html(summary, timeline, loss, stages_svg, simulated_svg));
  written.push_back("report.html");
  std::cout << report::summary_text(summary) << "wrote";
  for (const auto& f : written) std::cout << " " << run_dir << "/" << f;
  std::cout << "\n";
  return 0;
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  auto* c = app.add_subcommand("report", "summarise a run: measured vs simulated iteration, bubble, timeline SVG, loss curve, stage graph");
  c->add_option("run_dir", *run_dir, "the run directory, e.g. runs/fmnist-inception")->required();
  return {c, [run_dir] { return run_report(*run_dir); }};
}

}  // namespace trident::cli
