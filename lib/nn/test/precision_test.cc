// Note [Precision policy] on tensors: under bf16 every ATen call that
// trident's interpreter and captured programs make computes in the dtype
// the policy gives its class, for every zoo model and the captured models
// of the fuzz corpus; weights and their gradients stay fp32; a weight
// updated in place is seen by the next forward.
#include "trident/nn/graph_module.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>

#include <fstream>

#include "trident/data/dataset.h"
#include "trident/nn/graph_executor.h"
#include "trident/zoo/zoo.h"
#include "trident/test_paths.h"

namespace trident::nn {
namespace {

using graph::OpPrecision;

// Every dispatched call's name and output dtype, on the thread that records.
struct Calls {
  std::vector<std::pair<std::string, c10::ScalarType>> seen;
};
thread_local Calls* recording = nullptr;
thread_local int inside_fp32_op = 0;  // calls made by an op the policy keeps in fp32 as a whole

bool fp32_op(const at::RecordFunction& fn) {
  if (fn.scope() != at::RecordScope::USER_SCOPE) return false;
  const std::string name = fn.name();  // the graph ops the policy keeps in fp32 (Note [Precision policy])
  return name == "trident::graph_aggregate" || name == "trident::graph_attention" || name == "trident::block_aggregate";
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (recording && fp32_op(fn)) ++inside_fp32_op;
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (recording && fp32_op(fn)) --inside_fp32_op;
  if (!recording || inside_fp32_op || fn.scope() != at::RecordScope::FUNCTION) return;
  for (const auto& out : fn.outputs())
    if (out.isTensor() && out.toTensor().defined() && out.toTensor().is_floating_point())
      recording->seen.emplace_back(fn.name(), out.toTensor().scalar_type());
}

// The forward of the whole graph in bf16, and what each call produced.
Calls record_forward(const graph::OpGraph& g, GraphModule& gm, const Batch& batch, torch::Tensor* loss = nullptr) {
  Calls calls;
  auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end).needsOutputs(true));
  recording = &calls;
  auto out = GraphExecutor(gm, graph::whole_graph(g)).forward({}, batch);
  recording = nullptr;
  at::removeCallback(handle);
  if (loss) *loss = out.at(g.loss());
  return calls;
}

// Products and convolutions produce bf16, norms, softmax, losses and
// reductions fp32; returns how many calls of each class were checked.
std::pair<int, int> expect_policy(const Calls& calls, const std::string& model) {
  int low = 0, fp32 = 0;
  for (const auto& [name, dtype] : calls.seen) {
    const auto cls = graph::aten_call_precision(name);
    if (cls == OpPrecision::kLow) {
      ++low;
      EXPECT_EQ(dtype, torch::kBFloat16) << model << ": " << name;
    } else if (cls == OpPrecision::kFp32) {
      ++fp32;
      EXPECT_EQ(dtype, torch::kFloat32) << model << ": " << name;
    }
  }
  return {low, fp32};
}

graph::OpGraph corpus_model(const std::string& file) {
  std::ifstream in(std::string(TRIDENT_SOURCE_DIR) + "/fuzz/corpus/model/" + file);
  return graph::OpGraph::from_json(nlohmann::json::parse(in));
}

TEST(PrecisionPolicy, EveryCallOfEveryModelComputesInItsClassDtype) {
  std::vector<std::pair<std::string, graph::OpGraph>> models;
  for (const auto& name : zoo::model_names()) models.emplace_back(name, zoo::build_graph({name, "tiny"}));
  for (const auto* file : {"residual-cnn-aten.json", "regressor-aten.json"}) models.emplace_back(file, corpus_model(file));
  for (auto& [name, g] : models) {
    torch::manual_seed(2);
    GraphModule gm(g, 1);
    gm.set_precision(graph::Precision::kBf16);
    auto batch = data::random_batch(g, 4);
    for (const auto& op : g.ops())  // a regression's targets are floats
      if (op.is_input() && op.attrs.value("field", op.name) == "label" && op.output.dtype == graph::DType::kFloat32)
        batch["label"] = torch::randn(batch["label"].sizes());
    torch::Tensor loss;
    const auto calls = record_forward(g, gm, batch, &loss);
    const auto [low, fp32] = expect_policy(calls, name);
    EXPECT_GT(low, 0) << name << ": no product ran";
    EXPECT_GT(fp32, 0) << name << ": no loss ran";
    EXPECT_EQ(loss.scalar_type(), torch::kFloat32) << name;
    ASSERT_TRUE(std::isfinite(loss.item<double>())) << name;
    loss.backward();
    for (const auto& p : gm.named_parameters()) {
      EXPECT_EQ(p.value().scalar_type(), torch::kFloat32) << name << " " << p.key();
      if (p.value().grad().defined()) {
        EXPECT_EQ(p.value().grad().scalar_type(), torch::kFloat32) << name << " " << p.key();
      }
    }
  }
}

// No cast is cached: after an update in place the next forward uses the new
// weights, and a first forward without gradients leaves the next one with
// gradients for every weight.
TEST(PrecisionPolicy, WeightsAreNeverStaleAndANoGradForwardFirstLeavesGradients) {
  auto g = zoo::build_graph({"mlp", "tiny"});
  GraphModule gm(g, 1);
  gm.set_precision(graph::Precision::kBf16);
  const auto batch = data::random_batch(g, 4);
  auto sg = graph::whole_graph(g);
  const auto fc0 = g.id_of("fc0");
  sg.outputs.push_back(fc0);
  GraphExecutor ex(gm, sg);
  {
    torch::NoGradGuard no_grad;
    ex.forward({}, batch);
  }
  auto params = gm.parameters_of({fc0});
  auto& w = params[0].second;
  auto& b = params[1].second;
  {
    torch::NoGradGuard no_grad;
    w.mul_(-2);  // as an optimizer updates in place
  }
  const auto out = ex.forward({}, batch);
  const auto x = batch.at("image").flatten(1);
  const auto expected = torch::linear(x.to(torch::kBFloat16), w.to(torch::kBFloat16), b.to(torch::kBFloat16));
  // Bitwise: both sides are one bf16 linear on the same bf16 tensors in this process (autocast's casts, then
  // whichever bf16 kernel this CPU has, native or emulated).
  EXPECT_TRUE(torch::equal(out.at(fc0).detach(), expected));
  out.at(g.loss()).backward();
  for (const auto& p : gm.named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
  }
}

}  // namespace
}  // namespace trident::nn
