#include "trident/report/plan_tables.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "trident/base/text.h"
#include "trident/cost/network.h"
#include "trident/gnn/graph_data.h"
#include "trident/gnn/sampling.h"

namespace trident::report {

using plan::Plan;
using planner::Planner;
using plan::PlanStage;

namespace {

std::string fmt(const char* f, double v) { return format_number(f, v); }

std::string shorten(const std::string& s, std::size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 2) + "..";
}

std::string device_list(const std::vector<int>& d) {
  bool contiguous = true;
  for (std::size_t i = 1; i < d.size(); ++i) contiguous &= d[i] == d[i - 1] + 1;
  if (d.size() > 1 && contiguous) return std::to_string(d.front()) + "-" + std::to_string(d.back());
  std::string s;
  for (int x : d) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// A plan as lines of the same width: title, totals, a header, one row per stage.
std::vector<std::string> plan_lines(const Plan& plan, const std::string& title) {
  std::vector<std::string> lines{title, "partitioner " + plan.partitioner + ", " + std::to_string(plan.devices) +
                                            " devices, mini-batch " + std::to_string(plan.mini_batch) + " = " +
                                            micro_batch_summary(plan) +
                                            (plan.precision == "fp32" ? "" : ", " + plan.precision)};
  char line[256];
  std::snprintf(line, sizeof line, "%-5s %-30s %-8s %5s", "stage", "ops", "devices", "micro");
  lines.emplace_back(line);
  for (const auto& st : plan.stages) {
    std::string ops = std::to_string(st.ops.size()) + ": " + st.ops.front();
    if (st.ops.size() > 1) ops += " .. " + st.ops.back();
    std::snprintf(line, sizeof line, "%-5d %-30s %-8s %5d", st.id, shorten(ops, 30).c_str(),
                  device_list(st.devices).c_str(), st.micro_batch);
    lines.emplace_back(line);
  }
  return lines;
}

// "8 x V100-SXM2-16GB" or, on a mixed cluster, "16 devices: 8 x V100, 8 x A100".
std::string devices_summary(const cost::ClusterSpec& c, int devices) {
  if (!c.mixed()) return std::to_string(devices) + " x " + c.device.name;
  std::map<int, int> count;
  for (int d = 0; d < devices; ++d) ++count[c.class_index(d)];
  std::string s = std::to_string(devices) + " devices:";
  for (const auto& [k, n] : count) s += (s.back() == ':' ? " " : ", ") + std::to_string(n) + " x " + c.classes[k].name;
  return s;
}

// See Note [Class-aware placement]: per stage, each device's class and the
// rows of each micro-batch it runs (Note [Replica shares]).
std::string placement_lines(const cost::ClusterSpec& c, const Plan& plan) {
  std::ostringstream s;
  s << "placement (device: class, rows of each micro-batch):\n";
  for (const auto& st : plan.stages) {
    s << "  stage " << st.id << ":";
    for (std::size_t j = 0; j < st.devices.size(); ++j) {
      const auto [b, e] = plan.replica_rows(st.id, static_cast<int>(j), st.micro_batch);
      s << (j ? "," : "") << " " << st.devices[j] << ": " << c.device_at(st.devices[j]).name << ", " << e - b;
    }
    s << "\n";
  }
  return s.str();
}

// See Note [Node chunks] in nn/node_chunks.h: GNNPipe mode's chunks and the
// share of neighbour reads one epoch stale ("" for an exact GNN).
std::string gnnpipe_line(const graph::OpGraph& g, const Plan& plan) {
  for (const auto& op : g.ops()) {
    const int chunks = op.kind == "graph_aggregate" ? op.attrs.value("chunks", 0) : 0;
    if (chunks < 2) continue;
    int per = 1;  // the micro-batch of the stage that runs it
    for (const auto& st : plan.stages)
      if (std::find(st.ops.begin(), st.ops.end(), op.name) != st.ops.end()) per = st.micro_batch;
    const auto bounds = gnn::even_bounds(op.attrs.value("nodes", std::int64_t{0}), chunks);
    const auto n = gnn::chunk_read_counts(gnn::constant_adjacency(g), bounds, per);
    const double total = static_cast<double>(n.own + n.fresh + n.stale);
    std::ostringstream s;
    s << "graph mode: GNNPipe (not equal to one process): " << chunks << " chunks of up to " << bounds[1] - bounds[0]
      << " nodes, " << per << " per micro-batch, through " << plan.stages.size() << " stage"
      << (plan.stages.size() > 1 ? "s" : "") << "; of each aggregation's neighbour reads " << fmt("%.1f", 100 * n.own / total)
      << "% live, " << fmt("%.1f", 100 * n.fresh / total) << "% this epoch's, " << fmt("%.1f", 100 * n.stale / total)
      << "% one epoch stale\n";
    return s.str();
  }
  return "";
}

// See Note [Sampled blocks] in nn/sampled_blocks.h: what a sampled step
// pulls per process, estimated by sampling, and its time on the cluster's
// link among the processes: a pull is three all-to-alls (counts, ids,
// rows), each paying the link's latency per peer ("" for other models).
std::string sampled_lines(const graph::OpGraph& g, const Plan& plan, const cost::ClusterSpec& cluster) {
  const auto it = std::find_if(g.ops().begin(), g.ops().end(), [](const graph::Op& op) { return op.kind == "block_features"; });
  if (it == g.ops().end() || plan.stages.empty()) return "";
  const auto& st = plan.stages.front();
  const int processes = static_cast<int>(st.devices.size());
  const auto graph = gnn::load_graph(it->attrs.value("graph", std::string("csbm")), /*with_features=*/false);
  std::vector<std::int64_t> train;
  for (std::int64_t v = 0; v < graph.nodes; ++v)
    if (graph.train[static_cast<std::size_t>(v)]) train.push_back(v);
  gnn::SampleOptions o;
  o.fanouts = it->attrs.value("fanouts", std::vector<int>{});
  o.replace = it->attrs.value("replace", false);
  const auto seeds = std::max<std::int64_t>(1, st.micro_batch / std::max(1, processes));
  const auto pulls = std::max<std::int64_t>(1, plan.mini_batch / std::max<std::int64_t>(1, st.micro_batch));
  const auto e = gnn::estimate_pulls(gnn::in_neighbours(graph), train, seeds, processes, o, graph.features);
  std::vector<std::string> fan;
  for (int k : o.fanouts) fan.push_back(std::to_string(k));
  std::ostringstream s;
  s << "sampled mini-batches: fan-outs " << join(fan, ",") << "; " << seeds << " seed nodes a pull per process, "
    << pulls << " pull" << (pulls > 1 ? "s" : "") << " a step: about " << fmt("%.0f", e.rows) << " input rows a pull";
  if (processes > 1)
    s << ", " << fmt("%.0f", e.remote) << " (" << fmt("%.0f", 100 * e.remote / std::max(1.0, e.rows)) << "%) from the "
      << processes - 1 << " other process" << (processes > 2 ? "es" : "") << ": " << human_bytes(e.bytes * static_cast<double>(pulls))
      << " of features a step per process (estimated from 8 sampled batches); each holds 1/" << processes << " of the features ("
      << human_bytes(4.0 * static_cast<double>(graph.features) * static_cast<double>(graph.nodes) / processes) << ")";
  if (processes > 1) {
    const auto& link = cluster.group_link(st.devices);
    const double pull_s = 3.0 * (processes - 1) * link.latency_s + (link.bandwidth > 0 ? e.bytes / link.bandwidth : 0);
    s << "; pulling them takes about " << fmt("%.2f", 1e3 * pull_s * static_cast<double>(pulls))
      << " ms a step on the cluster's link (not in the prediction above)";
  }
  s << "\n";
  return s.str();
}

// See Note [Node partitions] in nn/node_parts.h: a GNN's mode and its bytes,
// the other mode's beside it, so a reader sees which moves less.
std::string graph_lines(const graph::OpGraph& g, const Plan& plan) {
  if (std::none_of(g.ops().begin(), g.ops().end(), [](const graph::Op& op) { return op.kind == "graph_aggregate"; }))
    return "";
  std::ostringstream s;
  const auto& st = plan.stages.front();
  if (const auto chunked = gnnpipe_line(g, plan); !chunked.empty()) return chunked;
  if (st.partition == "nodes") {
    const int parts = static_cast<int>(st.devices.size());
    std::int64_t nodes = 0;
    for (const auto& op : g.ops())
      if (op.kind == "graph_aggregate") nodes = op.output.shape.at(0);
    const auto bounds = gnn::even_bounds(nodes, parts);
    const auto halo = gnn::halo_sizes(gnn::constant_adjacency(g), bounds);
    std::vector<std::string> sizes, halos;
    for (int p = 0; p < parts; ++p)
      sizes.push_back(std::to_string(bounds[p + 1] - bounds[p])), halos.push_back(std::to_string(halo[p]));
    s << "graph partition (exact): " << parts << " parts of " << join(sizes, "/") << " nodes (contiguous), halos "
      << join(halos, "/") << " nodes: " << human_bytes(plan::stage_transfer_bytes(plan, g))
      << " per step (halo rows forward, their gradients backward)\n";
  } else {
    s << "graph mode: layer split (exact), " << plan.stages.size() << " stage" << (plan.stages.size() > 1 ? "s" : "")
      << "; a graph partition over " << plan.devices << " devices would move "
      << human_bytes(gnn::partition_bytes(g, plan.devices)) << " per step (partitioner graph)\n";
  }
  return s.str();
}

}  // namespace

std::string side_by_side(const Plan& before, const std::string& before_title, const Plan& after,
                         const std::string& after_title) {
  const auto left = plan_lines(before, before_title), right = plan_lines(after, after_title);
  std::size_t width = 0;
  for (const auto& l : left) width = std::max(width, l.size());
  std::ostringstream s;
  for (std::size_t i = 0; i < std::max(left.size(), right.size()); ++i) {
    const std::string l = i < left.size() ? left[i] : "";
    const std::string r = i < right.size() ? right[i] : "";
    s << l << std::string(width - l.size(), ' ') << " |" << (r.empty() ? "" : " " + r) << "\n";
  }
  return s.str();
}

std::string stage_table(const Planner& planner, const Plan& plan) {
  std::ostringstream s;
  const auto& p = plan.predicted;
  s << "plan: " << plan.model << "/" << plan.preset << " on " << devices_summary(planner.cluster(), plan.devices)
    << " (" << planner.cluster().name << "), partitioner " << plan.partitioner << ", schedule " << plan.schedule
    << (plan.precision == "fp32" ? "" : ", " + plan.precision)
    << "\n      mini-batch " << plan.mini_batch << " = " << micro_batch_summary(plan) << "; " << plan.stages.size()
    << " stages, depth " << p.depth
    << "; search " << fmt("%.3f", plan.search_seconds) << " s\n"
    << "predicted: " << fmt("%.1f", p.samples_per_s) << " samples/s, iteration " << fmt("%.2f", p.iteration_s * 1e3)
    << " ms, bubble " << fmt("%.1f", 100 * p.bubble_fraction) << "%"
    << (plan.pipeline_delay ? " (pipeline delay 1: the steady state, no fill or drain)" : "") << "\n";
  // See Note [Delayed pipelines]: the other mode, labelled; never chosen unasked.
  if (const auto& other = plan.pipeline_delay ? plan.synchronous : plan.delayed; other) {
    s << (plan.pipeline_delay ? "synchronous (pipeline_delay 0): " : "delayed (parallel.pipeline_delay=1, PipeDream-2BW): ")
      << fmt("%.1f", other->samples_per_s) << " samples/s, iteration " << fmt("%.2f", other->iteration_s * 1e3)
      << " ms, bubble " << fmt("%.1f", 100 * other->bubble_fraction) << "%"
      << (plan.pipeline_delay ? "" : "; one more weight copy per stage, not chosen unless set") << "\n";
  }
  if (plan.space_best.size() > 1) {
    s << "search spaces:";
    for (const auto& [name, best] : plan.space_best)
      s << " " << name << " best " << fmt("%.1f", best.samples_per_s) << " samples/s;";
    s << " chosen from " << plan.space << "\n";
  }
  if (plan.schedule_best.size() > 1) {
    s << "schedules (auto):";
    for (const auto& [name, best] : plan.schedule_best)
      s << " " << name << " " << fmt("%.1f", best.samples_per_s) << " samples/s, bubble "
        << fmt("%.1f", 100 * best.bubble_fraction) << "%;";
    s << " chosen " << plan.schedule << "\n";
  }
  if (!plan.placement_best.empty()) {  // See Note [Class-aware placement]
    s << "placements (mixed cluster):";
    std::string chosen;
    for (const auto& [name, best] : plan.placement_best) {
      s << " " << name << " " << fmt("%.1f", best.samples_per_s) << " samples/s;";
      if (best.samples_per_s >= p.samples_per_s * (1 - 1e-9) && chosen.empty()) chosen = name;
    }
    s << " chosen " << (chosen.empty() ? "?" : chosen) << "\n";
  }
  s << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-5s %-44s %-8s %5s %6s %6s %9s %10s %11s %19s %10s %10s\n", "stage", "ops",
                "devices", "micro", "rows", "flight", "recompute", "params", "activations", "memory/device", "F+B ms",
                "ms/sample");
  s << line;
  for (const auto& st : plan.stages) {
    std::string ops = std::to_string(st.ops.size()) + ": " + st.ops.front();
    if (st.ops.size() > 1) ops += " .. " + st.ops.back();
    const std::string mem = human_bytes(st.memory_bytes) + " / " + human_bytes(planner.memory_cap(st));
    const auto [first, last] = plan.replica_rows(st.id, 0, st.micro_batch);
    const std::string rows = st.shares.empty() ? std::to_string(last - first)
                                               : "<=" + std::to_string(*std::max_element(st.shares.begin(), st.shares.end()));
    std::snprintf(line, sizeof line, "%-5d %-44s %-8s %5d %6s %6d %9s %10s %11s %19s %10s %10s\n", st.id,
                  shorten(ops, 44).c_str(), device_list(st.devices).c_str(), st.micro_batch, rows.c_str(),
                  st.in_flight, st.recompute ? "yes" : "-",
                  human_bytes(st.param_bytes).c_str(), human_bytes(st.in_flight * st.activation_bytes).c_str(),
                  mem.c_str(), fmt("%.3f", (st.forward_s + st.backward_s) * 1e3).c_str(),
                  fmt("%.4f", st.predicted_tps_s * 1e3).c_str());
    s << line;
  }
  if (plan.stages.size() > 1)
    s << "between stages: " << human_bytes(plan::stage_transfer_bytes(plan, planner.graph()))
      << " per step (activations forward, their gradients backward)\n";
  s << graph_lines(planner.graph(), plan) << sampled_lines(planner.graph(), plan, planner.cluster());
  if (std::any_of(plan.stages.begin(), plan.stages.end(), [](const PlanStage& st) { return st.recompute; }))
    s << "recompute: the stage keeps only its inputs per micro-batch in flight (the activations column) and runs its "
         "forward again before each backward (in F+B)\n";
  const bool shared = std::any_of(plan.stages.begin(), plan.stages.end(), [](const PlanStage& st) { return !st.shares.empty(); });
  if (planner.cluster().mixed() || shared) s << placement_lines(planner.cluster(), plan);
  return s.str();
}

std::string sync_table(const Planner& planner, const Plan& plan, int max_rows) {
  struct Row {
    std::string name, shape;
    int stage, replicas;
    double bytes;
    double ms[3];
    bool sfb;
    std::string method;
  };
  std::vector<Row> rows;
  const auto& g = planner.graph();
  for (const auto& st : plan.stages) {
    const int d = static_cast<int>(st.devices.size());
    if (d < 2) continue;
    const auto& link = planner.cluster().group_link(st.devices);
    for (const auto& name : st.ops) {
      const auto& op = g.op(g.id_of(name));
      for (const auto& p : op.params) {
        Row r{p.name, "", st.id, d, static_cast<double>(p.bytes()), {0, 0, 0}, false, "allreduce"};
        for (std::size_t i = 0; i < p.shape.size(); ++i) r.shape += (i ? "x" : "") + std::to_string(p.shape[i]);
        const std::int64_t samples = plan.mini_batch / d;
        const auto& dev = planner.cluster().device;
        const auto wire = planner.request().wire();
        r.ms[0] = cost::sync_cost(cost::SyncMethod::kAllReduce, op, p, samples, d, link, dev, wire).seconds * 1e3;
        r.ms[1] = cost::sync_cost(cost::SyncMethod::kPs, op, p, samples, d, link, dev, wire).seconds * 1e3;
        r.sfb = cost::sfb_shape(op, p).has_value();
        if (r.sfb) r.ms[2] = cost::sync_cost(cost::SyncMethod::kSfb, op, p, samples, d, link, dev, wire).seconds * 1e3;
        auto it = plan.grad_sync.find(p.name);
        if (it != plan.grad_sync.end()) r.method = it->second;
        rows.push_back(std::move(r));
      }
    }
  }
  if (rows.empty()) return "gradient sync: no stage has more than one device\n";
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.bytes > b.bytes; });
  std::ostringstream s;
  std::map<std::string, int> counts;
  for (const auto& r : rows) ++counts[r.method];
  s << "gradient sync (" << planner.request().grad_sync << "):";
  for (const auto& [m, c] : counts) s << " " << m << " " << c;
  s << " parameters; largest:\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-40s %-12s %5s %10s %12s %10s %10s  %s\n", "parameter", "shape", "stage", "size",
                "allreduce ms", "ps ms", "sfb ms", "chosen");
  s << line;
  for (int i = 0; i < std::min<int>(max_rows, static_cast<int>(rows.size())); ++i) {
    const auto& r = rows[i];
    std::snprintf(line, sizeof line, "%-40s %-12s %5d %10s %12.3f %10.3f %10s  %s\n", shorten(r.name, 40).c_str(),
                  r.shape.c_str(), r.stage, human_bytes(r.bytes).c_str(), r.ms[0], r.ms[1],
                  r.sfb ? fmt("%.3f", r.ms[2]).c_str() : "-", r.method.c_str());
    s << line;
  }
  return s.str();
}

std::string to_dot(const Plan& plan) {
  std::ostringstream s;
  s << "digraph plan {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n";
  // See Note [Device classes]: on a mixed cluster each box is striped with
  // its replicas' class colours, and a legend names them.
  std::optional<cost::ClusterSpec> mixed;
  if (plan.cluster.is_object() && plan.cluster.contains("classes")) try {
      mixed = cost::parse_cluster(plan.cluster.dump(), "the plan's cluster");
    } catch (const cost::ClusterError&) {  // drawn without classes
    }
  static const char* const kColours[] = {"#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99"};
  auto colour = [&](int d) {
    const int k = mixed && d < mixed->capacity() ? mixed->class_index(d) : 0;
    return kColours[k % 6];
  };
  for (const auto& st : plan.stages) {
    s << "  s" << st.id << " [label=\"stage " << st.id << " (" << st.ops.size() << " ops)\\n";
    if (!st.ops.empty()) s << st.ops.front() << (st.ops.size() > 1 ? " .. " + st.ops.back() : "") << "\\n";
    s << "devices";
    for (std::size_t j = 0; j < st.devices.size(); ++j)
      s << " " << st.devices[j] << (st.shares.empty() ? "" : " (" + std::to_string(st.shares[j]) + " rows)");
    s << "\\nmicro-batch " << st.micro_batch << ", in flight " << st.in_flight << (st.recompute ? ", recompute" : "")
      << "\"";
    if (mixed) {
      s << ", style=\"striped\", fillcolor=\"";
      for (std::size_t j = 0; j < st.devices.size(); ++j) s << (j ? ":" : "") << colour(st.devices[j]);
      s << "\"";
    }
    s << "];\n";
  }
  if (mixed) {
    s << "  legend [shape=plaintext, label=<<table border=\"0\">";
    for (std::size_t k = 0; k < mixed->classes.size(); ++k)
      s << "<tr><td bgcolor=\"" << kColours[k % 6] << "\">" << mixed->classes[k].name << "</td></tr>";
    s << "</table>>];\n";
  }
  // Each edge: the tensors it carries and their bytes per micro-batch.
  for (const auto& e : plan.edges) {
    const int rows = e.from >= 0 && e.from < static_cast<int>(plan.stages.size()) ? plan.stages[e.from].micro_batch : 1;
    s << "  s" << e.from << " -> s" << e.to << " [label=\"";
    double total = 0;
    for (std::size_t i = 0; i < e.tensors.size(); ++i) {
      const auto& t = e.tensors[i];
      double bytes = static_cast<double>(graph::element_bytes(graph::dtype_from_string(t.dtype))) * rows;
      for (auto d : t.shape) bytes *= static_cast<double>(d);
      total += bytes;
      s << (i ? "\\n" : "") << t.op << " [";
      for (std::size_t k = 0; k < t.shape.size(); ++k) s << (k ? "," : "") << t.shape[k];
      s << "] " << human_bytes(bytes);
    }
    if (e.tensors.size() > 1) s << "\\n" << human_bytes(total) << " per micro-batch";
    else s << " per micro-batch";
    s << "\"];\n";
  }
  s << "}\n";
  return s.str();
}

std::string micro_batch_summary(const Plan& plan) {
  if (plan.stages.empty()) return "no stages";
  if (plan.one_micro_batch_size())
    return std::to_string(plan.micro_batches(0)) + " micro-batches of " + std::to_string(plan.stages[0].micro_batch);
  std::string sizes;
  for (const auto& st : plan.stages) sizes += (sizes.empty() ? "" : ", ") + std::to_string(st.micro_batch);
  return "micro-batches of " + sizes + " by stage";
}

}  // namespace trident::report
