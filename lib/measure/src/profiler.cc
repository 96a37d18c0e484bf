#include "trident/measure/profiler.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>

#include "trident/nn/graph_executor.h"
#include "trident/process/process.h"
#include "trident/data/dataset.h"

namespace trident::measure {
namespace {

using Clock = std::chrono::steady_clock;

// Note [Whole-graph normalisation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An op timed alone costs more than inside a pass: its backward runs its own
// autograd graph (and input gradients the pass never needs), its forward
// allocates afresh. Measured on inception/tiny at 1 thread, the ops' sum was
// 1.3x the executor's whole forward+backward. So each row count's op times
// are scaled, forward and backward separately, to the executor's measured
// whole-graph pass: op shares come from the ops alone, totals from the pass.
void normalise(cost::Profile& p, std::size_t at, const graph::OpGraph& g, nn::GraphExecutor& whole,
               nn::GraphModule& module, int repeats) {
  const std::int64_t rows = p.rows[at];
  whole.set_observer({});
  const auto batch = data::random_batch(g, rows);
  std::vector<double> fwd, bwd;
  for (int r = 0; r < repeats + 1; ++r) {
    auto t0 = Clock::now();
    auto out = whole.forward({}, batch);
    auto t1 = Clock::now();
    out.at(g.loss()).backward();
    auto t2 = Clock::now();
    for (auto& param : module.parameters()) param.mutable_grad() = torch::Tensor();
    if (r == 0) continue;
    fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
    bwd.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  double sum_f = 0, sum_b = 0;
  for (const auto& [name, t] : p.ops) sum_f += t.forward_s[at], sum_b += t.backward_s[at];
  const double scale_f = sum_f > 0 ? median(fwd) / sum_f : 1, scale_b = sum_b > 0 ? median(bwd) / sum_b : 1;
  for (auto& [name, t] : p.ops) {
    t.forward_s[at] *= scale_f, t.backward_s[at] *= scale_b;
    if (!t.weight_s.empty()) t.weight_s[at] *= scale_b;
  }
}

// The op's parameters that train, by the graph's names.
std::vector<torch::Tensor> params_of(const graph::Op& op, nn::GraphModule& module) {
  const auto named = module.named_parameters();
  std::vector<torch::Tensor> out;
  for (const auto& spec : op.params)
    if (const auto* t = named.find(spec.name); t && t->requires_grad()) out.push_back(*t);
  return out;
}

// A split backward's W for one op (Note [Split backward] in schedule.h): its
// backward asked for the weight gradients alone, the median of `repeats`.
double weight_time(const std::function<torch::Tensor()>& forward, const std::vector<torch::Tensor>& params,
                   int repeats) {
  std::vector<double> times;
  for (int r = 0; r < repeats + 1; ++r) {  // the first run warms up
    auto out = forward();
    if (!out.requires_grad()) return 0;
    const auto t0 = Clock::now();
    torch::autograd::backward({out}, {torch::ones_like(out)}, /*retain_graph=*/false, /*create_graph=*/false, params);
    if (r) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return median(times);
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

cost::Profile profile_model(const zoo::ModelSpec& model, const ProfileOptions& o) {
  if (o.rows.empty()) throw InputError("profile: --micro-batches is empty; give e.g. 1,2,4,8");
  for (std::size_t i = 0; i < o.rows.size(); ++i)
    if (o.rows[i] < 1 || (i && o.rows[i] <= o.rows[i - 1]))
      throw InputError("profile: --micro-batches must be ascending and >= 1, got " +
                                  std::to_string(o.rows[i]) + " at position " + std::to_string(i + 1));
  if (o.repeats < 1) throw InputError("profile: --repeats must be >= 1, got " + std::to_string(o.repeats));
  process::configure_process(o.threads);
  torch::manual_seed(0);
  const auto g = zoo::build_graph(model);
  nn::GraphModule module(g);
  module.set_precision(o.precision);
  nn::GraphExecutor whole(module, graph::whole_graph(g));
  cost::Profile p;
  p.model = model.name, p.preset = model.preset;
  p.device = "this machine (" + std::to_string(o.threads) + " thread" +
             (o.precision == graph::Precision::kFp32 ? "" : ", " + graph::to_string(o.precision)) + ")";
  p.rows = o.rows;
  // Note [Gradients an op computes]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // In a training pass an op computes the
  // gradient of an input only where a parameter lies upstream of it; the
  // first layer never computes the gradient of the image. Timed alone, the
  // op is asked for exactly those, or its backward would carry work the pass
  // never does (on inception/tiny, the first convolution's input gradient
  // was a fifth of the backward, and normalisation spread the excess over
  // every other op's share).
  const auto carries_grad = g.carries_gradients();
  for (auto rows : o.rows) {
    // Every op's inputs, from one forward of a random batch.
    std::vector<std::vector<torch::Tensor>> inputs(g.size());
    whole.set_observer([&](graph::OpId id, const std::vector<torch::Tensor>& in, const torch::Tensor&) {
      for (const auto& t : in) inputs[id].push_back(t.detach());
    });
    {
      torch::NoGradGuard no_grad;
      whole.forward({}, data::random_batch(g, rows));
    }
    for (graph::OpId id = 0; id < g.size(); ++id) {
      const auto& op = g.op(id);
      if (op.is_input()) continue;
      auto args = inputs[id];
      for (std::size_t k = 0; k < args.size() && k < op.inputs.size(); ++k)
        if (args[k].is_floating_point() && carries_grad[op.inputs[k].producer]) args[k].set_requires_grad(true);
      std::vector<double> fwd, total;
      for (int r = 0; r < o.repeats + 1; ++r) {  // the first run warms up
        for (auto& a : args)
          if (a.requires_grad()) a.mutable_grad() = torch::Tensor();
        auto t0 = Clock::now();
        auto out = module.op_fn(id)(args);
        auto t1 = Clock::now();
        if (out.requires_grad()) out.backward(torch::ones_like(out));
        auto t2 = Clock::now();
        if (r == 0) continue;
        fwd.push_back(std::chrono::duration<double>(t1 - t0).count());
        total.push_back(std::chrono::duration<double>(t2 - t0).count());
      }
      auto& times = p.ops[op.name];
      const double f = median(fwd);
      times.forward_s.push_back(f);
      times.backward_s.push_back(std::max(0.0, median(total) - f));
      if (const auto params = params_of(op, module); !params.empty())
        times.weight_s.push_back(std::min(
            times.backward_s.back(), weight_time([&] { return module.op_fn(id)(args); }, params, o.repeats)));
    }
    for (auto& param : module.parameters()) param.mutable_grad() = torch::Tensor();
    normalise(p, p.ops.begin()->second.forward_s.size() - 1, g, whole, module, o.repeats);
  }
  return p;
}

}  // namespace trident::measure
