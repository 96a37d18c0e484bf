// Times trident's single-process training step: GraphExecutor forward on the
// whole graph, loss / batch, backward, per-parameter optimizer step — the
// same code path as runtime::Trainer. Prints one JSON line.
//   bench_step MODEL BATCH THREADS STEPS
// Inputs are one fixed random batch (as in bench/pytorch_step.py), so only
// the step is timed, not data loading.
#include <chrono>
#include <iostream>

#include "trident/nn/executor.h"
#include "trident/runtime/process.h"
#include "trident/runtime/optimizer.h"
#include "trident/zoo/zoo.h"

using namespace trident;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: bench_step MODEL BATCH THREADS STEPS\n";
    return 2;
  }
  const std::string model = argv[1];
  const int64_t batch = std::stoll(argv[2]), threads = std::stoll(argv[3]), steps = std::stoll(argv[4]);
  runtime::configure_process(static_cast<int>(threads));  // as the trainer does
  torch::manual_seed(0);
  auto g = zoo::build_graph({model, "tiny"});
  nn::GraphModule gm(g);
  nn::GraphExecutor ex(gm, graph::whole_graph(g));
  auto params = gm.parameters_of(ex.subgraph().ops);
  runtime::OptimizerConfig oc;  // SGD, momentum 0.9
  oc.lr = 0.01;
  auto opt = runtime::Optimizer::make(oc);

  auto b = nn::random_batch(g, batch);
  auto step = [&] {
    auto loss = ex.forward({}, b).at(g.loss()) / static_cast<double>(batch);
    loss.backward();
    opt->apply(params, oc.lr);
    return loss.item<double>();
  };
  for (int i = 0; i < 5; ++i) step();  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  double last = 0;
  for (int64_t i = 0; i < steps; ++i) last = step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "{\"system\": \"trident\", \"model\": \"" << model << "\", \"batch\": " << batch
            << ", \"threads\": " << threads << ", \"steps\": " << steps << ", \"steps_per_s\": " << steps / s
            << ", \"last_loss\": " << last << "}\n";
}
