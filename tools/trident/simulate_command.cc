// `trident simulate --plan FILE`: what any plan, planned or hand-written, does per iteration.
#include "commands.h"

#include <iostream>

#include "plans.h"
#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/plan/plan.h"
#include "trident/report/plan_tables.h"
#include "trident/schedule/simulator.h"
#include "trident/zoo/zoo.h"

namespace trident::cli {
namespace {

struct SimulateArgs {
  std::string plan, trace;
  bool json = false;
};

void print_warnings(const planner::Planner& planner, const plan::Plan& p) {
  for (const auto& st : p.stages)
    if (st.memory_bytes > planner.memory_cap(st))
      std::cerr << "warning: stage " << st.id << " needs " << human_bytes(st.memory_bytes)
                << " per device, over the " << human_bytes(planner.memory_cap(st)) << " limit\n";
}

int run_simulate(const SimulateArgs& a) {
  auto p = plan::load_plan(a.plan);
  const auto g = zoo::build_graph({p.model, p.preset, p.model_file, "", p.model_graph, p.graph_chunks, p.fanouts, p.sample_replace, p.hidden,
                                       p.node_embedding});
  const auto planner = planner_for(p, g, a.plan);
  const auto result = planner.predict(p);
  if (a.json) {
    nlohmann::json out = p.to_json()["predicted"];
    out["stages"] = nlohmann::json::array();
    for (const auto& st : p.stages)
      out["stages"].push_back({{"id", st.id},
                               {"utilisation", result.utilisation[st.id]},
                               {"peak_memory_bytes", st.memory_bytes},
                               {"in_flight", st.in_flight}});
    std::cout << out.dump(1) << "\n";
  } else {
    std::cout << report::stage_table(planner, p) << "\nutilisation:";
    for (const auto& st : p.stages) std::cout << " s" << st.id << " " << static_cast<int>(100 * result.utilisation[st.id] + 0.5) << "%";
    std::cout << "\n";
  }
  print_warnings(planner, p);
  if (!a.trace.empty()) {
    write_file_atomic(a.trace, schedule::chrome_trace(planner.stage_graph(p), result).dump() + "\n");
    if (!a.json) std::cout << "wrote " << a.trace << " (open in ui.perfetto.dev or chrome://tracing)\n";
  }
  return 0;
}

}  // namespace

Command add_simulate_command(CLI::App& app) {
  auto a = std::make_shared<SimulateArgs>();
  auto* c = app.add_subcommand("simulate", "predict a plan's iteration: time, samples/s, bubble, memory, timeline");
  c->add_option("--plan", a->plan, "plan JSON (from `trident plan`, or written by hand)")->required();
  c->add_option("--trace", a->trace, "write a Chrome trace (chrome://tracing, ui.perfetto.dev)");
  c->add_flag("--json", a->json, "print the predictions as JSON");
  return {c, [a] { return run_simulate(*a); }};
}

}  // namespace trident::cli
