// Times trident's data-parallel training step on the ranks of the launcher's
// environment (run by bench/run_dp.sh): forward on this rank's slice of a
// fixed random global batch, backward with gradient sync (WFBP), optimizer
// step. Rank 0 prints one JSON line.
//   RANK=r WORLD_SIZE=n MASTER_ADDR=... MASTER_PORT=... bench_dp MODEL GLOBAL_BATCH THREADS STEPS SYNC [WFBP]
// SYNC: allreduce | ps | sfb (Linear weights; the rest all-reduce) | hybrid (HybComm on this machine's
// calibration; the JSON line says what it chose for the largest weight).
#include <chrono>
#include <cstdlib>
#include <iostream>

#include "trident/sync/grad_sync.h"
#include "trident/cost/cluster.h"
#include "trident/cost/network.h"
#include "trident/nn/graph_executor.h"
#include "trident/optim/optimizer.h"
#include "trident/process/process.h"
#include "trident/zoo/builder.h"
#include "trident/zoo/zoo.h"
#include "trident/data/dataset.h"

using namespace trident;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: bench_dp MODEL GLOBAL_BATCH THREADS STEPS allreduce|ps|sfb [WFBP 1|0]\n";
    return 2;
  }
  process::prepare_process(argv);  // as `trident train` starts (see Note [CPU process settings], see Note [BLAS kernel])
  const std::string model = argv[1], method = argv[5];
  const int64_t batch = std::stoll(argv[2]), threads = std::stoll(argv[3]), steps = std::stoll(argv[4]);
  const bool wfbp = argc < 7 || std::string(argv[6]) != "0";
  process::configure_process(static_cast<int>(threads));
  const auto world = comm::world_from_env();
  auto group = comm::Group::connect(world, std::chrono::seconds(60));
  torch::manual_seed(0);
  graph::OpGraph g;
  if (model == "wide_fc") {  // one 4096 x 4096 layer: the FC-heavy case for SFB
    zoo::GraphBuilder b("wide_fc");
    auto x = b.input("x", {{4096}, graph::DType::kFloat32});
    auto h = b.activation("relu", "relu", b.linear("fc", x, 4096));
    b.cross_entropy("loss", b.linear("head", h, 8), b.input("label", {{}, graph::DType::kInt64}, 8));
    g = b.finish();
  } else {
    g = zoo::build_graph({model, "tiny"});
  }
  nn::GraphModule gm(g);
  nn::GraphExecutor ex(gm, graph::whole_graph(g));
  auto params = gm.parameters_of(ex.subgraph().ops);
  std::unique_ptr<sync::GradSync> sync;
  if (method == "allreduce") sync = sync::make_allreduce_sync(group, params, 25 << 20, wfbp);
  if (method == "ps") sync = sync::make_ps_sync(group, params, {0, 25 << 20, &g});
  if (method == "sfb") {
    std::map<std::string, std::string> m;
    for (const auto& op : g.ops())
      for (const auto& p : op.params) m[p.name] = op.kind == "linear" && p.name.size() > 7 &&
                                                          p.name.substr(p.name.size() - 7) == ".weight" ? "sfb" : "allreduce";
    sync = sync::make_hybrid_sync(group, params, g, m);
  }
  std::string choice;  // hybrid: what HybComm chose for the largest weight
  if (method == "hybrid") {
    // Poseidon's HybComm on this machine's calibration (parallel.cluster: auto).
    const auto cluster = cost::load_cluster("auto");
    std::map<std::string, std::string> m;
    double largest = 0;
    for (const auto& op : g.ops())
      for (const auto& p : op.params) {
        const auto c = cost::choose_sync(op, p, batch / world.world_size, world.world_size, cluster.intra_node,
                                         cluster.device, 25 << 20);
        m[p.name] = cost::to_string(c.method);
        if (static_cast<double>(p.bytes()) > largest) largest = static_cast<double>(p.bytes()), choice = m[p.name];
      }
    sync = sync::make_hybrid_sync(group, params, g, m);
  }
  if (!sync) {
    std::cerr << "bench_dp: unknown sync " << method << "\n";
    return 2;
  }
  ex.set_observer(sync->observer());
  ex.set_gate(sync->gate());
  config::OptimizerConfig oc;  // SGD, momentum 0.9
  oc.lr = 0.01;
  auto opt = optim::Optimizer::make(oc);
  auto gen = at::detail::createCPUGenerator(world.rank + 1);
  auto b = data::random_batch(g, batch / world.world_size, gen);
  double bytes = 0, exposed = 0;
  auto step = [&] {
    auto loss = ex.forward({}, b).at(g.loss()) / static_cast<double>(batch);
    sync->arm();
    loss.backward();
    sync->finish();
    sync->apply([&](const std::string& n, torch::Tensor& p, const torch::Tensor& grad) { opt->step(n, p, grad, oc.lr); });
    for (auto& [n, p] : params) p.mutable_grad().zero_();
    bytes = 0;
    for (const auto& [n, v] : sync->stats().sent) bytes += v;
    exposed += sync->stats().exposed_s;
  };
  for (int i = 0; i < 5; ++i) step();
  exposed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (world.rank == 0 && std::getenv("BENCH_DP_EVENTS"))  // the last step's sync spans, ms from its arm()
    for (const auto& e : sync->stats().events)
      std::cerr << e.name << " " << 1e3 * e.start_s << " .. " << 1e3 * e.end_s << "\n";
  if (world.rank == 0)
    std::cout << "{\"system\": \"trident\", \"model\": \"" << model << "\", \"sync\": \"" << sync->name()
              << "\", \"ranks\": " << world.world_size << ", \"batch\": " << batch << ", \"threads\": " << threads
              << ", \"steps_per_s\": " << steps / s << ", \"iteration_ms\": " << 1e3 * s / steps
              << ", \"bytes_sent\": " << bytes << ", \"exposed_ms\": " << 1e3 * exposed / steps
              << ", \"choice\": \"" << choice << "\"}\n";
}
