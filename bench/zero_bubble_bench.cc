// Zero-bubble schedules in simulation (issue 42): for each model and device
// count, the graphpipe plan's stage graph (its DAG) under graph-1f1b and
// graph-zb, and the pipedream plan's (a chain, as a user who linearises the
// model runs it) under 1f1b, zb-h1 and zb-h2 — W priced as its weight
// products alone, as the runtime runs it (Note [Split backward at the
// weights]); and what graphpipe's `parallel.schedule: auto` chooses (Note
// [Automatic schedule]). Prints Markdown.
//   build/bench/zero_bubble_bench [CLUSTER] [SAMPLES_PER_DEVICE]   (make bench-build)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "trident/planner/planner.h"
#include "trident/schedule/simulator.h"
#include "trident/zoo/zoo.h"

using namespace trident;

int main(int argc, char** argv) {
  const std::string cluster_name = argc > 1 ? argv[1] : "summit-v100";
  const int per_device = argc > 2 ? std::atoi(argv[2]) : 16;
  const auto cluster = cost::load_cluster(cluster_name);
  const auto cost = cost::analytic_cost_model(cluster.device);
  std::printf("cluster %s, mini-batch %d per device; samples/s (bubble %%), W priced as its weight products\n\n",
              cluster_name.c_str(), per_device);
  std::printf("| model | devices | graphpipe stages (depth) | graph-1f1b | graph-zb | pipedream stages | 1f1b | zb-h1 | "
              "zb-h2 | graph-zb / best chain zb | graph-zb / graph-1f1b | graphpipe, auto |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const char* model : {"transformer", "mmt", "candle_uno", "dlrm", "inception"}) {
    graph::OpGraph graph;
    try {
      graph = zoo::build_graph({model, "paper"});
    } catch (const std::exception&) {
      graph = zoo::build_graph({model, "tiny"});
    }
    for (int devices : {4, 8, 16, 32}) {
      planner::PlanRequest r;
      r.model = model, r.devices = devices, r.mini_batch = per_device * devices;
      // Each partition's stage graph, simulated under the schedules given.
      auto run = [&](const char* partitioner, const char* base, std::initializer_list<const char*> names,
                     std::string& cells, std::vector<double>& tps) {
        r.partitioner = partitioner, r.schedule = base;
        planner::Planner planner(graph, cluster, cost, r);
        auto p = planner.plan();
        const auto sg = planner.stage_graph(p);
        char buf[96];
        std::snprintf(buf, sizeof buf, " %zu (%d) |", p.stages.size(), p.predicted.depth);
        cells += buf;
        for (const char* name : names) {
          const auto res = schedule::simulate(sg, schedule::make_schedule(name, sg, p.micro_batch_counts()), p.mini_batch);
          std::snprintf(buf, sizeof buf, " %.1f (%.0f%%) |", res.samples_per_s, 100 * res.bubble_fraction);
          cells += buf;
          tps.push_back(res.samples_per_s);
        }
      };
      try {
        std::string cells;
        std::vector<double> graphpipe, pipedream;
        run("graphpipe", "graph-1f1b", {"graph-1f1b", "graph-zb"}, cells, graphpipe);
        run("pipedream", "1f1b", {"1f1b", "zb-h1", "zb-h2"}, cells, pipedream);
        r.partitioner = "graphpipe", r.schedule = "";
        const auto chosen = planner::Planner(graph, cluster, cost, r).plan();
        std::printf("| %s | %d |%s %.2f | %.2f | %s %.1f |\n", model, devices, cells.c_str(),
                    graphpipe[1] / std::max(pipedream[1], pipedream[2]), graphpipe[1] / graphpipe[0],
                    chosen.schedule.c_str(), chosen.predicted.samples_per_s);
      } catch (const std::exception& e) {
        std::printf("| %s | %d | %s |\n", model, devices, e.what());
      }
    }
  }
}
