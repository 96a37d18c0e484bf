// Times trident's single-process training step: GraphExecutor forward on the
// whole graph, loss / batch (its tokens, for gpt), backward, per-parameter optimizer step — the
// same code path as runtime::Trainer. Prints one JSON line.
//   bench_step MODEL BATCH THREADS STEPS [PRESET [DEVICE [PRECISION]]]
// Inputs are one fixed random batch (as in bench/pytorch_step.py), so only
// the step is timed, not data loading. PRESET is tiny (default) or paper;
// DEVICE is cpu (default) or cuda (see Note [Placement]: the model and batch
// are placed as the trainer places them). BATCH "max" doubles the batch
// from 64 up to 1024 while a step fits in the device's memory and times the
// largest that fits. PRECISION is fp32 (default) or bf16 (train.precision,
// see Note [Precision policy]). PRESET is any of the model's (gpt: tiny,
// gpt2-124m, ...). Warm-up: 5 steps, or STEPS when fewer.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "trident/nn/graph_executor.h"
#include "trident/optim/optimizer.h"
#include "trident/executor/tensor_placement.h"
#include "trident/process/process.h"
#include "trident/zoo/zoo.h"
#include "trident/data/dataset.h"

using namespace trident;

namespace {

struct Bench {
  graph::OpGraph graph;
  executor::Placement where;
  std::int64_t batch;
  nn::GraphModule module;
  nn::GraphExecutor executor;
  std::vector<std::pair<std::string, torch::Tensor>> params;
  config::OptimizerConfig config;
  std::unique_ptr<optim::Optimizer> optimizer;
  nn::Batch fields;

  Bench(graph::OpGraph g, executor::Placement p, std::int64_t rows, graph::Precision precision)
      : graph(std::move(g)), where(std::move(p)), batch(rows), module(graph),
        executor(module, graph::whole_graph(graph)) {
    where.place(module);
    module.set_precision(precision);
    params = module.parameters_of(executor.subgraph().ops);
    config.lr = 0.01;  // SGD, momentum 0.9
    optimizer = optim::Optimizer::make(config);
    torch::manual_seed(0);
    fields = where.batch(data::random_batch(graph, batch));
  }
  double step() {
    // The batch's rows, or its tokens for a per-token loss (see Note [Loss scale]).
    auto loss = executor.forward({}, fields).at(graph.loss()) / nn::loss_divisor(graph.op(graph.loss()), fields.at("label"));
    loss.backward();
    optimizer->apply(params, config.lr);
    return loss.item<double>();
  }
};

bool out_of_memory(const c10::Error& e) { return std::string(e.what()).find("out of memory") != std::string::npos; }

// The largest batch of 64, 128, ... 1024 whose step fits.
std::int64_t largest_batch(const graph::OpGraph& g, const executor::Placement& where, graph::Precision precision) {
  std::int64_t fits = 0;
  for (std::int64_t b = 64; b <= 1024; b *= 2) {
    try {
      Bench(g, where, b, precision).step();
      fits = b;
    } catch (const c10::Error& e) {
      if (!out_of_memory(e)) throw;
      break;
    }
  }
  if (!fits) throw std::runtime_error("not even a batch of 64 fits on " + where.describe());
  return fits;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || argc > 8) {
    std::cerr << "usage: bench_step MODEL BATCH|max THREADS STEPS [PRESET [cpu|cuda [fp32|bf16]]]\n";
    return 2;
  }
  process::prepare_process(argv);  // as `trident train` starts (see Note [CPU process settings], see Note [BLAS kernel])
  try {
    const std::string model = argv[1], preset = argc > 5 ? argv[5] : "tiny", device = argc > 6 ? argv[6] : "cpu";
    const int64_t threads = std::stoll(argv[3]), steps = std::stoll(argv[4]);
    const auto precision = graph::precision_from_string(argc > 7 ? argv[7] : "fp32");
    if (!precision) throw std::runtime_error(std::string("precision '") + argv[7] + "': allowed: fp32, bf16");
    process::configure_process(static_cast<int>(threads));  // as the trainer does
    const auto where = executor::Placement::choose(device, 0);
    auto g = zoo::build_graph({model, preset});
    const std::int64_t batch = std::string(argv[2]) == "max" ? largest_batch(g, where, *precision) : std::stoll(argv[2]);
    Bench bench(g, where, batch, *precision);
    for (int64_t i = 0; i < std::min<int64_t>(5, steps); ++i) bench.step();  // warm-up (fewer for a slow model)
    const auto t0 = std::chrono::steady_clock::now();
    double last = 0;
    for (int64_t i = 0; i < steps; ++i) last = bench.step();  // item() waits for the device each step
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "{\"system\": \"trident\", \"model\": \"" << model << "\", \"preset\": \"" << preset
              << "\", \"device\": \"" << where.describe() << "\", \"precision\": \"" << graph::to_string(*precision)
              << "\", \"batch\": " << batch << ", \"threads\": " << threads
              << ", \"steps\": " << steps << ", \"steps_per_s\": " << steps / s
              << ", \"samples_per_s\": " << static_cast<double>(steps * batch) / s << ", \"last_loss\": " << last
              << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "bench_step: " << e.what() << "\n";
    return 1;
  }
}
