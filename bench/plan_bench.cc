// Planner benchmark (issue 3): predicted samples/s of graphpipe, pipedream
// and dp plans for the paper-size branchy models and a sequential one, and
// how long each search takes, on one core. Prints a Markdown table.
//   build/bench/plan_bench [CLUSTER] [SAMPLES_PER_DEVICE] [RECOMPUTE] [MEMORY_GIB] [RATIO]   (make bench-plan)
// The mini-batch is SAMPLES_PER_DEVICE x devices (weak scaling, default 16);
// RECOMPUTE is the planner's rule (auto, never, always; default auto). A
// plan with recomputing stages shows "rc N" (N of its stages). MEMORY_GIB
// overrides the devices' memory (default: the cluster's; 0 too). RATIO is
// graphpipe's micro-batch ratio (default 0: the planner's, 2); a plan whose
// stages' micro-batches differ shows b as "smallest-largest".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "trident/planner/planner.h"
#include "trident/zoo/zoo.h"

using namespace trident;

int main(int argc, char** argv) {
  const std::string cluster_name = argc > 1 ? argv[1] : "summit-v100";
  const int per_device = argc > 2 ? std::atoi(argv[2]) : 16;
  const std::string recompute = argc > 3 ? argv[3] : "auto";
  const double memory_gib = argc > 4 ? std::atof(argv[4]) : 0;
  const int size_ratio = argc > 5 ? std::atoi(argv[5]) : 0;
  const auto cluster = cost::load_cluster(cluster_name);
  const auto cost = cost::analytic_cost_model(cluster.device);
  std::printf("| model | devices | mini-batch | graphpipe samples/s (depth, b, space) | graphpipe best: series-parallel "
              "/ sequential space | pipedream samples/s (depth, b) | dp samples/s (b) | GPP/SPP | GPP/DP | graphpipe "
              "search s | pipedream search s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const char* model : {"mmt", "dlrm", "candle_uno", "transformer"}) {
    const auto graph = zoo::build_graph({model, "paper"});
    for (int devices : {4, 8, 16, 32}) {
      planner::PlanRequest r;
      r.model = model, r.preset = "paper", r.devices = devices, r.mini_batch = per_device * devices;
      r.recompute = recompute;
      r.micro_batch_ratio = size_ratio;
      if (memory_gib > 0) r.device_memory_bytes = memory_gib * (1 << 30);
      plan::Plan plans[3];
      std::string cells[3];
      const char* names[3] = {"graphpipe", "pipedream", "dp"};
      for (int i = 0; i < 3; ++i) {
        r.partitioner = names[i], r.schedule = "";
        r.micro_batch_ratio = i == 0 ? size_ratio : 0;
        try {
          plans[i] = planner::Planner(graph, cluster, cost, r).plan();
          char buf[96];
          if (i == 0) {
            int lo = plans[i].stages[0].micro_batch, hi = lo;
            for (const auto& st : plans[i].stages) lo = std::min(lo, st.micro_batch), hi = std::max(hi, st.micro_batch);
            const std::string sizes = std::to_string(lo) + (hi > lo ? "-" + std::to_string(hi) : "");
            std::snprintf(buf, sizeof buf, "%.1f (%d, %s, %s", plans[i].predicted.samples_per_s,
                          plans[i].predicted.depth, sizes.c_str(), plans[i].space == "series-parallel" ? "SP" : "seq");
          } else if (i == 1) {
            std::snprintf(buf, sizeof buf, "%.1f (%d, %d", plans[i].predicted.samples_per_s,
                          plans[i].predicted.depth, plans[i].stages[0].micro_batch);
          } else {
            std::snprintf(buf, sizeof buf, "%.1f (%d", plans[i].predicted.samples_per_s, plans[i].stages[0].micro_batch);
          }
          int recomputing = 0;
          for (const auto& st : plans[i].stages) recomputing += st.recompute;
          cells[i] = buf + (recomputing ? ", rc " + std::to_string(recomputing) : std::string()) + ")";
        } catch (const plan::PlanError&) {
          cells[i] = "no plan fits";
        }
      }
      auto ratio = [&](int a, int b) {
        const double x = plans[a].predicted.samples_per_s, y = plans[b].predicted.samples_per_s;
        char buf[32];
        std::snprintf(buf, sizeof buf, x > 0 && y > 0 ? "%.2f" : "-", x / y);
        return std::string(buf);
      };
      auto space = [&](const char* name) {
        const auto it = plans[0].space_best.find(name);
        char buf[32];
        std::snprintf(buf, sizeof buf, it == plans[0].space_best.end() ? "-" : "%.1f",
                      it == plans[0].space_best.end() ? 0.0 : it->second.samples_per_s);
        return std::string(buf);
      };
      const auto spaces = space("series-parallel") + " / " + space("sequential");
      std::printf("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %.3f | %.3f |\n", model, devices, r.mini_batch,
                  cells[0].c_str(), spaces.c_str(), cells[1].c_str(), cells[2].c_str(), ratio(0, 1).c_str(),
                  ratio(0, 2).c_str(), plans[0].search_seconds, plans[1].search_seconds);
      std::fflush(stdout);
    }
  }
  return 0;
}
