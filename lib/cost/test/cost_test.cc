#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "trident/cost/buckets.h"
#include "trident/cost/network.h"
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

// Parsing `text` throws ClusterError whose message holds `needle`.
void expect_error(const std::string& text, const std::string& needle) {
  try {
    parse_cluster(text, "c.yaml");
    FAIL() << "expected ClusterError for " << text;
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
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
  auto doc = v100.to_json();
  doc["nodes"] = -1;
  expect_error(doc.dump(), "'nodes' must be > 0");
  doc = v100.to_json();
  doc["gpus"] = 3;
  expect_error(doc.dump(), "unknown key 'gpus'");
  doc = v100.to_json();
  doc["device"]["launch_us"] = "x";
  expect_error(doc.dump(), "'device.launch_us' must be a number");
  doc = v100.to_json();
  doc["nodes"] = 1e30;  // once cast to int unchecked (undefined behaviour)
  expect_error(doc.dump(), "'nodes' must be a whole number from 1 to 1048576, got 1e+30");
  doc["nodes"] = 2.5;
  expect_error(doc.dump(), "'nodes' must be a whole number");
  doc = v100.to_json();
  doc["name"] = {1, 2};  // fuzz_cluster: a value of the wrong kind escaped as a yaml-cpp exception
  expect_error(doc.dump(), "c.yaml: line 1, column");
  expect_error("{[1]: 2}", "c.yaml: line 1, column");
  expect_error("name: [", "not valid YAML/JSON: line 1");
  doc = v100.to_json();
  doc["core_throughput"] = {1.0, 2.5};
  expect_error(doc.dump(), "core_throughput[1] = 2.5");
  doc["core_throughput"] = {1.0, "many"};
  expect_error(doc.dump(), "core_throughput[1] = 'many' must be a number");
  doc["core_throughput"] = 1.5;
  expect_error(doc.dump(), "core_throughput must be a list");
  const std::string yaml =
      "name: y\ndevice: {float32_tflops: 1, memory_gib: 2, memory_bandwidth_gbs: 3, half_efficiency_gflop: 1,"
      " launch_us: 1}\ndevices_per_node: 2\nnodes: 3\nintra_node: {latency_us: 1, bandwidth_gbs: 10}\n"
      "inter_node: {latency_us: 2, bandwidth_gbs: 1}\n";
  EXPECT_EQ(parse_cluster(yaml, "c.yaml").capacity(), 6);
}

// See Note [Device classes]: a mixed cluster's classes, hosts and links
// survive the file format; a link given one way serves both unless the
// other is given; a group talks at its slowest link; bad files name the field.
TEST(Cluster, MixedClustersNameClassesHostsAndLinks) {
  const std::string yaml = R"(name: lab
classes:
  - {name: slow, float32_tflops: 10, memory_gib: 16, memory_bandwidth_gbs: 900, half_efficiency_gflop: 1, launch_us: 10}
  - {name: fast, float32_tflops: 20, memory_gib: 80, memory_bandwidth_gbs: 2000, half_efficiency_gflop: 2, launch_us: 8}
hosts:
  - {devices: {fast: 1, slow: 2}, link: {latency_us: 5, bandwidth_gbs: 50}}
  - {devices: {fast: 3}, link: {latency_us: 3, bandwidth_gbs: 300}}
  - {devices: {slow: 3}, link: {latency_us: 5, bandwidth_gbs: 40}}
links:
  - {from: 0, to: 1, latency_us: 10, bandwidth_gbs: 12.5}
  - {from: 1, to: 0, latency_us: 10, bandwidth_gbs: 6}
  - {from: 0, to: 2, latency_us: 10, bandwidth_gbs: 25}
  - {from: 1, to: 2, latency_us: 10, bandwidth_gbs: 20}
)";
  const auto c = parse_cluster(yaml, "lab.yaml");
  ASSERT_TRUE(c.mixed());
  EXPECT_EQ(c.capacity(), 9);
  EXPECT_EQ(c.class_of, (std::vector<int>{0, 0, 1, 1, 1, 1, 0, 0, 0}));  // class by class in the classes' order
  EXPECT_EQ(c.device_at(2).name, "fast");
  EXPECT_DOUBLE_EQ(c.device_at(0).peak(graph::DType::kFloat32), 10e12);
  EXPECT_DOUBLE_EQ(c.link(0, 1).bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(c.link(3, 4).bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(c.link(0, 3).bandwidth, 12.5e9);  // host 0 -> 1
  EXPECT_DOUBLE_EQ(c.link(3, 0).bandwidth, 6e9);     // host 1 -> 0: given apart
  EXPECT_DOUBLE_EQ(c.link(6, 0).bandwidth, 25e9);    // host 2 -> 0: the one direction given serves both
  EXPECT_DOUBLE_EQ(c.group_link({3, 4, 5}).bandwidth, 300e9);
  EXPECT_DOUBLE_EQ(c.group_link({2, 3}).bandwidth, 6e9);  // the slower way around
  EXPECT_DOUBLE_EQ(c.group_link({6, 7, 3}).bandwidth, 20e9);
  const auto avg = c.average_device(3);
  EXPECT_NEAR(avg.peak(graph::DType::kFloat32), (10e12 + 10e12 + 20e12) / 3, 1);
  const auto again = parse_cluster(c.to_json().dump(), "again.json");
  EXPECT_EQ(again.class_of, c.class_of);
  EXPECT_DOUBLE_EQ(again.link(3, 0).bandwidth, 6e9);
  EXPECT_DOUBLE_EQ(again.link(3, 4).bandwidth, 300e9);
  for (const auto& preset : {"mixed-v100-a100", "mixed-h200-a100"}) {
    const auto p = load_cluster(preset);
    EXPECT_TRUE(p.mixed()) << preset;
    EXPECT_EQ(parse_cluster(p.to_json().dump(), "p.json").class_of, p.class_of) << preset;
  }
  auto edit = [&](const std::string& from, const std::string& to) {
    auto t = yaml;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  expect_error(edit("{fast: 3}", "{tpu: 3}"), "'hosts[1].devices.tpu' names an unknown class; the classes are slow, fast");
  expect_error(edit("  - {from: 1, to: 2, latency_us: 10, bandwidth_gbs: 20}\n", ""),
               "links: no link between host 1 and host 2");
  // Hosts of different sizes: device ids still run host by host.
  const auto uneven = parse_cluster(edit("{slow: 3}", "{slow: 5}"), "uneven.yaml");
  EXPECT_EQ(uneven.capacity(), 11);
  EXPECT_EQ(uneven.node_of(5), 1);
  EXPECT_EQ(uneven.node_of(6), 2);
  EXPECT_EQ(uneven.node_of(10), 2);
  EXPECT_EQ(uneven.first_device(2), 6);
  EXPECT_DOUBLE_EQ(uneven.link(10, 0).bandwidth, 25e9);
  EXPECT_EQ(parse_cluster(uneven.to_json().dump(), "again.json").class_of, uneven.class_of);
  expect_error(edit("{slow: 3}", "{}"), "'hosts[2].devices' holds no device");
  expect_error(edit("from: 0, to: 2", "from: 0, to: 5"), "'links[2].to' = 5 must be a host from 0 to 2");
  expect_error(edit("{name: slow, float32_tflops: 10", "{name: slow, float32_tflops: -1"), "'classes[0].float32_tflops' must be > 0");
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

// A split backward's W (Note [Split backward]): measured where the profile
// has it, else the op's forward; never more than the backward; 0 without
// parameters.
TEST(ProfiledCost, WeightGradientsAreTheMeasuredPartOfTheBackward) {
  auto g = zoo::build_graph({"mlp", "tiny"});
  Profile p;
  p.model = "mlp", p.preset = "tiny", p.rows = {2, 4};
  for (const auto& op : g.ops())
    if (!op.is_input()) p.ops[op.name] = {{1e-3, 2e-3}, {4e-3, 8e-3}};
  const auto& fc = g.op(g.id_of("fc0"));
  const auto& relu = g.op(g.id_of("fc0_relu"));
  EXPECT_DOUBLE_EQ(profiled_cost_model(p, g, "p").weight_grad_s(fc, 3), 1.5e-3);  // not measured: the forward
  p.ops[fc.name].weight_s = {3e-3, 9e-3};
  auto back = Profile::from_json(p.to_json(), "p.json");
  const auto model = profiled_cost_model(back, g, "p.json");
  EXPECT_DOUBLE_EQ(model.weight_grad_s(fc, 2), 3e-3);
  EXPECT_DOUBLE_EQ(model.weight_grad_s(fc, 4), 8e-3);  // capped at the backward
  EXPECT_DOUBLE_EQ(model.weight_grad_s(relu, 4), 0);
  auto doc = p.to_json();
  doc["ops"][fc.name]["weight_s"] = {1e-3};
  EXPECT_THROW(Profile::from_json(doc, "p.json"), ClusterError);
  doc["ops"][fc.name]["weight_s"] = {1e-3, -1.0};
  EXPECT_THROW(Profile::from_json(doc, "p.json"), ClusterError);
}

TEST(CommCost, ByteCountsFollowPoseidonsFormulas) {
  // GoogLeNet's classifier: W is 1000 x 1024 floats, K = 32 samples per rank.
  const std::int64_t M = 1024, N = 1000, K = 32;
  const double S = 4.0 * M * N;
  for (int P : {2, 3, 4, 16}) {
    EXPECT_DOUBLE_EQ(allreduce_bytes(S, P), 2 * S * (P - 1) / P);
    // Poseidon's colocated PS: 2MN(P1+P2-2)/P2 floats sent + received per
    // node, with P1 = P2 = P; the sharded PS sends half of it.
    EXPECT_DOUBLE_EQ(2 * ps_bytes(S, P), 4.0 * 2 * M * N * (P + P - 2) / P);
    EXPECT_DOUBLE_EQ(ps_bytes(S, P), allreduce_bytes(S, P));
    // Send + receive = 2K(P-1)(M+N) floats.
    EXPECT_DOUBLE_EQ(2 * sfb_bytes(K, M, N, 4, P), 4.0 * 2 * K * (P - 1) * (M + N));
  }
}

// See Note [Measured links] and `trident calibrate`'s file: tables, cores and
// profiles survive the round trip and price what they cover.
TEST(Cluster, CalibratedLinksPriceFromTheirTables) {
  auto c = load_cluster("cpu-local");
  c.cores_per_node = 2;
  c.intra_node.measured["p2p"][2] = {{1000, 1e-4}, {3000, 3e-4}};
  c.intra_node.measured["allreduce"][2] = {{1000, 1e-3}, {2000, 2e-3}};
  const auto g = zoo::build_graph({"mlp", "tiny"});
  Profile p;
  p.model = "mlp", p.preset = "tiny", p.rows = {1, 8};
  for (const auto& op : g.ops())
    if (!op.is_input()) p.ops[op.name] = {{1e-3, 2e-3}, {3e-3, 4e-3}};
  p.core_throughput = {1.0, 1.8};
  c.profiles["mlp/tiny/1"] = std::make_shared<const Profile>(p);
  auto p2 = p;
  for (auto& [name, t] : p2.ops) t.forward_s = {5e-3, 6e-3};
  c.profiles["mlp/tiny/2"] = std::make_shared<const Profile>(p2);
  auto bf16 = p;
  for (auto& [name, t] : bf16.ops) t.forward_s = {7e-4, 9e-4};
  c.profiles[profile_key("mlp", "tiny", 1, graph::Precision::kBf16)] = std::make_shared<const Profile>(bf16);
  c.core_throughput = {1.0, 1.4, 1.7};
  const auto again = parse_cluster(c.to_json().dump(), "cal.json");
  EXPECT_EQ(again.cores_per_node, 2);
  EXPECT_EQ(again.core_throughput, c.core_throughput);
  EXPECT_EQ(parse_cluster(c.to_json(false).dump(), "plan").core_throughput, c.core_throughput);
  EXPECT_EQ(again.threads_per_process(1), 2);
  EXPECT_EQ(again.threads_per_process(3), 1);
  const auto& link = again.intra_node;
  EXPECT_DOUBLE_EQ(p2p_s(link, 2000), 2e-4);                                  // between measured sizes
  EXPECT_DOUBLE_EQ(p2p_s(link, 10), 1e-4);                                    // below: the smallest
  EXPECT_DOUBLE_EQ(p2p_s(link, 3000 + link.bandwidth * 1e-3), 3e-4 + 1e-3);   // beyond: at the bandwidth
  EXPECT_DOUBLE_EQ(allreduce_s(link, 1500, 2), 1.5e-3);
  // 4 processes, measured on 2: scaled by the formula's ratio.
  const double ratio = (6 * link.latency_s + 1500 * 1.5 / link.bandwidth) / (2 * link.latency_s + 1500 * 1.0 / link.bandwidth);
  EXPECT_NEAR(allreduce_s(link, 1500, 4), 1.5e-3 * ratio, 1e-12);
  // The PS (an alltoall push and pull): as the all-reduce until its alltoall
  // is measured, then two of those.
  EXPECT_DOUBLE_EQ(ps_s(link, 1500, 2), allreduce_s(link, 1500, 2));
  auto with_alltoall = c;
  with_alltoall.intra_node.measured["alltoall"][2] = {{1000, 4e-4}, {2000, 6e-4}};
  const auto& measured = parse_cluster(with_alltoall.to_json().dump(), "cal.json").intra_node;
  EXPECT_DOUBLE_EQ(ps_s(measured, 1500, 2), 2 * 5e-4);
  // bf16 pushes (Note [Push dtype]): the push priced at half the bytes, the pull whole.
  EXPECT_DOUBLE_EQ(ps_s(measured, 2000, 2, 0.5), 4e-4 + 6e-4);  // alltoall of 1000 bytes, then 2000
  EXPECT_DOUBLE_EQ(ps_s(link, 2000, 2, 0.5), allreduce_s(link, 1500, 2));
  EXPECT_DOUBLE_EQ(allreduce_s(measured, 1500, 2), 1.5e-3);
  // The profile at the thread count a run uses; the analytic model for others.
  std::string source;
  const auto& fc = g.op(g.id_of("fc0"));
  EXPECT_DOUBLE_EQ(cost_model_for(again, g, "tiny", 1, &source).forward_s(fc, 1), 1e-3);
  // See Note [Core throughput]: the model's own figure travels with its profile.
  EXPECT_EQ(cost_model_for(again, g, "tiny", 1).core_throughput(), p.core_throughput);
  const auto described = cost_model_for(again, g, "tiny", 1).describe();
  EXPECT_EQ(Profile::from_json(described["data"], "plan").core_throughput, p.core_throughput);
  EXPECT_DOUBLE_EQ(cost_model_for(again, g, "tiny", 4, &source).forward_s(fc, 1), 5e-3);  // nearest below: 2
  EXPECT_NE(source.find("mlp/tiny/2"), std::string::npos) << source;
  cost_model_for(again, g, "paper", 1, &source);
  EXPECT_EQ(source.rfind("analytic", 0), 0u) << source;
  // Another graph of the same name (a captured model called as the zoo's):
  // the analytic model, saying why, where an explicit profile is refused.
  auto renamed = zoo::build_graph({"cnn", "tiny"}).to_json();
  renamed["name"] = g.name();
  const auto other = graph::OpGraph::from_json(renamed);
  cost_model_for(again, other, "tiny", 1, &source);
  EXPECT_EQ(source.rfind("analytic", 0), 0u) << source;
  EXPECT_NE(source.find("is of another graph (no op '"), std::string::npos) << source;
  EXPECT_THROW(profiled_cost_model(*again.profiles.at("mlp/tiny/1"), other, "cal.json"), ClusterError);
  // A bf16 run prices from the profile measured in bf16, an fp32 run never
  // does; without a bf16 profile at any count, bf16 takes fp32's and says so.
  constexpr auto kBf16 = graph::Precision::kBf16;
  EXPECT_DOUBLE_EQ(cost_model_for(again, g, "tiny", 1, &source, kBf16).forward_s(fc, 1), 7e-4);
  EXPECT_NE(source.find("mlp/tiny/1/bf16"), std::string::npos) << source;
  EXPECT_DOUBLE_EQ(cost_model_for(again, g, "tiny", 2, &source, kBf16).forward_s(fc, 1), 7e-4);  // nearest below: 1
  EXPECT_DOUBLE_EQ(cost_model_for(again, g, "tiny", 1, &source).forward_s(fc, 1), 1e-3);
  auto fp32_only = again;
  fp32_only.profiles.erase("mlp/tiny/1/bf16");
  EXPECT_DOUBLE_EQ(cost_model_for(fp32_only, g, "tiny", 1, &source, kBf16).forward_s(fc, 1), 1e-3);
  EXPECT_NE(source.find("no bf16 profiles"), std::string::npos) << source;
  // A bad table is named.
  auto doc = c.to_json();
  doc["intra_node"]["measured"]["allreduce"]["2"] = {{2000, 1e-3}, {1000, 2e-3}};
  try {
    parse_cluster(doc.dump(), "cal.json");
    FAIL() << "descending bytes accepted";
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("intra_node.measured.allreduce.2 needs ascending bytes"), std::string::npos)
        << e.what();
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
  EXPECT_EQ(choose_sync(op, op.params[1], 32, 16, link, fast).method, SyncMethod::kPs);  // bias: no SFB
  // PS moves what all-reduce moves and keeps 1/P of the optimizer state:
  // it wins the tie, within kPsMemoryTieBreak, bucketed or not.
  const LinkSpec slow{1e-3, 1e9};
  EXPECT_EQ(choose_sync(op, op.params[1], 32, 16, slow, fast).method, SyncMethod::kPs);
  EXPECT_EQ(choose_sync(op, op.params[1], 32, 16, slow, fast, 25 << 20).method, SyncMethod::kPs);
  EXPECT_EQ(choose_sync(op, w, 32, 33, link, fast).method, SyncMethod::kPs);
  EXPECT_EQ(choose_sync(op, w, 32, 1, link, fast).seconds, 0);
  EXPECT_THROW(sync_cost(SyncMethod::kSfb, op, op.params[1], 32, 4, link, fast), ClusterError);
  // What moves narrower (SyncWire): bf16 factors half SFB's bytes, bf16 pushes a quarter off the PS's.
  const SyncWire bf16{0.5, 2};
  EXPECT_DOUBLE_EQ(2 * sync_cost(SyncMethod::kSfb, op, w, 32, 4, link, fast, bf16).bytes,
                   sync_cost(SyncMethod::kSfb, op, w, 32, 4, link, fast).bytes);
  EXPECT_DOUBLE_EQ(sync_cost(SyncMethod::kPs, op, w, 32, 4, link, fast, bf16).bytes,
                   0.75 * sync_cost(SyncMethod::kPs, op, w, 32, 4, link, fast).bytes);
  EXPECT_LT(sync_cost(SyncMethod::kPs, op, w, 32, 4, link, fast, bf16).seconds,
            sync_cost(SyncMethod::kPs, op, w, 32, 4, link, fast).seconds);
}

// See Note [Gradient buckets]: a new bucket when the next tensor would overflow
// the size; one larger than the size gets its own; a size below 1 is refused.
TEST(Buckets, PackedAsTheRuntimeSendsThem) {
  BucketPacker p(100);
  EXPECT_TRUE(p.add(40));   // the first opens bucket 1
  EXPECT_FALSE(p.add(60));  // 100: fits exactly
  EXPECT_TRUE(p.add(1));    // bucket 2
  EXPECT_TRUE(p.add(500));  // larger than the size: bucket 3, alone
  EXPECT_TRUE(p.add(10));   // bucket 4
  EXPECT_FALSE(p.add(0));
  EXPECT_EQ(p.buckets(), 4);
  EXPECT_THROW(BucketPacker(0), InputError);
}

}  // namespace
}  // namespace trident::cost

namespace trident::cost {
namespace {

// The presets are cluster files (cluster_presets.cc): each reads, under its
// own name, and the JSON a plan records of it reads back to the same devices.
TEST(Cluster, EveryPresetIsAClusterFileThatReadsBack) {
  ASSERT_EQ(cluster_presets().size(), 8u);
  for (const auto& name : cluster_presets()) {
    const auto c = load_cluster(name);
    EXPECT_EQ(c.name, name);
    const auto back = parse_cluster(c.to_json().dump(), "again");
    EXPECT_EQ(back.capacity(), c.capacity()) << name;
    EXPECT_EQ(back.class_of, c.class_of) << name;
    EXPECT_EQ(back.device.name, c.device.name) << name;
    EXPECT_EQ(back.device.memory_bytes, c.device.memory_bytes) << name;
  }
}

}  // namespace
}  // namespace trident::cost
