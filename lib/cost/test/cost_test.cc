#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "trident/cost/comm.h"
#include "trident/cost/cost_model.h"
#include "trident/zoo/zoo.h"

namespace trident::cost {
namespace {

graph::Op linear(std::int64_t in, std::int64_t out) {
  graph::Op op{"fc", "linear", {}, {{0, {{in}, graph::DType::kFloat32}}}, {{out}, graph::DType::kFloat32}};
  op.params = {{"fc.weight", {out, in}}, {"fc.bias", {out}}};
  op.forward_flops = 2.0 * in * out;
  op.backward_flops = 2 * op.forward_flops;
  return op;
}

TEST(Cluster, PresetsLoadAndUnknownNamesListThem) {
  for (const auto& name : cluster_presets()) {
    auto c = load_cluster(name);
    EXPECT_EQ(c.name, name);
    EXPECT_GT(c.device.memory_bytes, 0);
    EXPECT_GT(c.capacity(), 0);
  }
  auto v100 = load_cluster("summit-v100");
  EXPECT_EQ(v100.devices_per_node, 4);
  EXPECT_EQ(v100.link(0, 3).bandwidth, v100.intra_node.bandwidth);
  EXPECT_EQ(v100.link(3, 4).bandwidth, v100.inter_node.bandwidth);
  EXPECT_EQ(v100.group_link({4, 5, 6, 7}).bandwidth, v100.intra_node.bandwidth);
  EXPECT_EQ(v100.group_link({2, 3, 4, 5}).bandwidth, v100.inter_node.bandwidth);
  try {
    load_cluster("summit");
    FAIL();
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("summit-v100"), std::string::npos) << e.what();
  }
}

TEST(Cluster, FileRoundTripsAndBadFieldsAreNamed) {
  auto v100 = load_cluster("summit-v100");
  auto again = parse_cluster(v100.to_json().dump(), "x.json");
  EXPECT_DOUBLE_EQ(again.inter_node.bandwidth, v100.inter_node.bandwidth);
  EXPECT_DOUBLE_EQ(again.device.peak(graph::DType::kFloat32), v100.device.peak(graph::DType::kFloat32));
  EXPECT_EQ(again.device.memory_bytes, v100.device.memory_bytes);
  // JSON is read too.
  auto json = parse_cluster(
      R"({"name": "j", "device": {"float32_tflops": 1, "memory_gib": 2, "memory_bandwidth_gbs": 3,
          "half_efficiency_gflop": 1, "launch_us": 1}, "devices_per_node": 2, "nodes": 1,
          "intra_node": {"latency_us": 1, "bandwidth_gbs": 10}, "inter_node": {"latency_us": 2, "bandwidth_gbs": 1}})",
      "c.json");
  EXPECT_EQ(json.capacity(), 2);
  auto expect_error = [](const std::string& text, const std::string& needle) {
    try {
      parse_cluster(text, "c.yaml");
      FAIL() << "expected ClusterError for " << text;
    } catch (const ClusterError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto doc = v100.to_json();
  doc["nodes"] = -1;
  expect_error(doc.dump(), "'nodes' must be > 0");
  doc = v100.to_json();
  doc["gpus"] = 3;
  expect_error(doc.dump(), "unknown key 'gpus'");
  doc = v100.to_json();
  doc["device"]["launch_us"] = "x";
  expect_error(doc.dump(), "'device.launch_us' must be a number");
  const std::string yaml =
      "name: y\ndevice: {float32_tflops: 1, memory_gib: 2, memory_bandwidth_gbs: 3, half_efficiency_gflop: 1,"
      " launch_us: 1}\ndevices_per_node: 2\nnodes: 3\nintra_node: {latency_us: 1, bandwidth_gbs: 10}\n"
      "inter_node: {latency_us: 2, bandwidth_gbs: 1}\n";
  EXPECT_EQ(parse_cluster(yaml, "c.yaml").capacity(), 6);
}

TEST(AnalyticCost, SmallMicroBatchesRunBelowPeak) {
  auto c = load_cluster("summit-v100");
  auto model = analytic_cost_model(c.device);
  auto op = linear(1024, 4096);
  const double peak = c.device.peak(graph::DType::kFloat32);
  double prev = 1e9;
  for (std::int64_t rows : {1, 2, 4, 8, 64, 1024}) {
    const double per_sample = model.forward_s(op, rows) / rows;
    EXPECT_LT(per_sample, prev) << rows;  // time per sample falls as the micro-batch grows
    EXPECT_GE(per_sample, op.forward_flops / peak);
    prev = per_sample;
  }
  // At 1024 rows a GEMM this size runs within 15% of peak.
  EXPECT_LT(model.forward_s(op, 1024) / (1024 * op.forward_flops / peak), 1.15);
  EXPECT_GT(model.backward_s(op, 8), model.forward_s(op, 8));
  graph::Op input{"x", "input", {}, {}, {{4}, graph::DType::kFloat32}};
  EXPECT_EQ(model.forward_s(input, 8), 0);
  EXPECT_EQ(model.forward_s(op, 0), 0);
}

TEST(ProfiledCost, InterpolatesAndNamesMissingOps) {
  auto g = zoo::build_graph({"mlp", "tiny"});
  Profile p;
  p.model = "mlp", p.preset = "tiny", p.rows = {2, 4, 8};
  for (const auto& op : g.ops())
    if (!op.is_input()) p.ops[op.name] = {{1e-3, 2e-3, 3e-3}, {2e-3, 4e-3, 6e-3}};
  auto doc = p.to_json();
  auto back = Profile::from_json(doc, "p.json");
  auto model = profiled_cost_model(back, g, "p.json");
  const auto& op = g.op(g.loss());
  EXPECT_DOUBLE_EQ(model.forward_s(op, 1), 1e-3);   // below: the smallest measured time
  EXPECT_DOUBLE_EQ(model.forward_s(op, 3), 1.5e-3);  // between: linear
  EXPECT_DOUBLE_EQ(model.backward_s(op, 6), 5e-3);
  EXPECT_DOUBLE_EQ(model.forward_s(op, 16), 6e-3);  // above: per-sample time of the largest
  p.ops.erase(op.name);
  try {
    profiled_cost_model(p, g, "p.json");
    FAIL();
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + op.name + "'"), std::string::npos) << e.what();
  }
  doc["ops"][op.name]["forward_s"] = {1e-3};
  EXPECT_THROW(Profile::from_json(doc, "p.json"), ClusterError);
}

TEST(CommCost, ByteCountsFollowPoseidonsFormulas) {
  // GoogLeNet's classifier: W is 1000 x 1024 floats, K = 32 samples per rank.
  const std::int64_t M = 1024, N = 1000, K = 32;
  const double S = 4.0 * M * N;
  for (int P : {2, 3, 4, 16}) {
    EXPECT_DOUBLE_EQ(allreduce_bytes(S, P), 2 * S * (P - 1) / P);
    EXPECT_DOUBLE_EQ(ps_bytes(S, P), 2 * S * (P - 1) / P);
    // Send + receive = 2MN(P1+P2-2)/P2 floats for a colocated node (P1 = P2 = P).
    EXPECT_DOUBLE_EQ(2 * ps_bytes(S, P), 4.0 * 2 * M * N * (2 * P - 2) / P);
    // Send + receive = 2K(P-1)(M+N) floats.
    EXPECT_DOUBLE_EQ(2 * sfb_bytes(K, M, N, 4, P), 4.0 * 2 * K * (P - 1) * (M + N));
  }
}

TEST(CommCost, HybCommPicksSfbExactlyBelowTheBreakEven) {
  // With no latency and free rebuild GEMMs, SFB wins iff P*K <= 2MN/(M+N)
  // (about 1012 for 1024 x 1000).
  DeviceSpec fast;
  fast.peak_flops[graph::DType::kFloat32] = 1e30;
  LinkSpec link{0, 1e9};
  auto op = linear(1024, 1000);
  const auto& w = op.params[0];
  EXPECT_EQ(choose_sync(op, w, 32, 16, link, fast).method, SyncMethod::kSfb);   // 512
  EXPECT_EQ(choose_sync(op, w, 32, 31, link, fast).method, SyncMethod::kSfb);   // 992
  EXPECT_NE(choose_sync(op, w, 32, 33, link, fast).method, SyncMethod::kSfb);   // 1056
  EXPECT_EQ(choose_sync(op, op.params[1], 32, 16, link, fast).method, SyncMethod::kAllReduce);  // bias: no SFB
  // With latency, PS's two rounds beat a ring's 2(P-1) steps on a small tensor.
  EXPECT_EQ(choose_sync(op, op.params[1], 32, 8, LinkSpec{1e-5, 1e9}, fast).method, SyncMethod::kPs);
  EXPECT_EQ(choose_sync(op, w, 32, 1, link, fast).seconds, 0);
  EXPECT_THROW(sync_cost(SyncMethod::kSfb, op, op.params[1], 32, 4, link, fast), ClusterError);
}

}  // namespace
}  // namespace trident::cost
