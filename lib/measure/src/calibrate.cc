// See Note [Calibration] in calibrate.h.
#include "trident/measure/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include <torch/torch.h>

#include "trident/base/files.h"
#include "trident/base/text.h"
#include "trident/comm/group.h"
#include "trident/comm/world.h"
#include "trident/cost/cost_model.h"
#include "trident/graph/subgraph.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/graph_module.h"
#include "trident/optim/optimizer.h"
#include "trident/process/process.h"
#include "trident/measure/profiler.h"
#include "trident/base/progress.h"
#include "trident/data/dataset.h"

namespace trident::measure {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The median time of `repeats` calls of `fn`, after one warm-up call.
template <class Fn>
double timed(int repeats, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(since(t0));
  }
  return median(t);
}

// The mean time of `repeats` calls of `fn`, each after 1 ms of computing as
// a training step does between collectives (a process that has been busy,
// not one spinning in a tight loop of messages), after one warm-up call. The
// mean, not the median: the occasional slow wake-up is part of the cost.
template <class Fn>
double timed_after_work(int repeats, Fn&& fn) {
  const auto a = torch::randn({64, 64});
  double total = 0;
  for (int r = 0; r <= repeats; ++r) {
    const auto busy = Clock::now();
    while (since(busy) < 1e-3) (void)torch::mm(a, a);
    const auto t0 = Clock::now();
    fn();
    if (r > 0) total += since(t0);
  }
  return total / repeats;
}

// Pool-adjacent-violators: the closest non-decreasing sequence (least
// squares), so that a larger message is never priced below a smaller one.
void make_non_decreasing(nlohmann::json& rows) {
  std::vector<std::pair<double, int>> blocks;  // (mean, count)
  for (const auto& row : rows) {
    blocks.emplace_back(row[1].get<double>(), 1);
    while (blocks.size() > 1 && blocks[blocks.size() - 2].first > blocks.back().first) {
      auto [m, n] = blocks.back();
      blocks.pop_back();
      auto& prev = blocks.back();
      prev.first = (prev.first * prev.second + m * n) / (prev.second + n);
      prev.second += n;
    }
  }
  std::size_t i = 0;
  for (const auto& [m, n] : blocks)
    for (int k = 0; k < n; ++k) rows[i++][1] = m;
}

void wait(const c10::intrusive_ptr<c10d::Work>& work, const comm::Group& g) { work->wait(g.timeout()); }

// Rank 0 sends `bytes` to rank 1, which sends them back: half the round trip.
double ping_pong(const comm::Group& g, std::int64_t bytes, int repeats) {
  auto t = torch::zeros({std::max<std::int64_t>(1, bytes / 4)});
  std::vector<at::Tensor> v{t};
  const int peer = 1 - g.rank();
  return timed_after_work(repeats, [&] {
           if (g.rank() == 0) {
             wait(g.pg().send(v, peer, 0), g);
             wait(g.pg().recv(v, peer, 0), g);
           } else {
             wait(g.pg().recv(v, peer, 0), g);
             wait(g.pg().send(v, peer, 0), g);
           }
         }) / 2;
}

// One collective of `bytes` per rank (all-gather: from each rank; alltoall:
// 1/P of them to each, as the PS's push and pull), timed.
double collective(const comm::Group& g, const std::string& op, std::int64_t bytes, int repeats) {
  const auto elements = std::max<std::int64_t>(1, bytes / 4);
  std::vector<at::Tensor> v{torch::zeros({elements})};
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int r = 0; r < g.size(); ++r) gathered[0].push_back(torch::zeros({elements}));
  const auto even = (elements + g.size() - 1) / g.size() * g.size();
  auto in = torch::zeros({even}), out = torch::zeros({even});
  std::vector<std::int64_t> splits;  // empty: equal
  return timed_after_work(repeats, [&] {
    if (op == "allreduce") wait(g.pg().allreduce(v), g);
    else if (op == "alltoall") wait(g.pg().alltoall_base(out, in, splits, splits), g);
    else wait(g.pg().allgather(gathered, v), g);
  });
}

void barrier(const comm::Group& g) {
  std::vector<at::Tensor> v{torch::zeros({1})};
  wait(g.pg().allreduce(v), g);
}

// Note [Sharing workload]
// ~~~~~~~~~~~~~~~~~~~~~~~
// How well processes share the cores depends on
// what they compute (on one 2-vCPU machine, two processes multiplying
// matrices did 1.0-1.2x one's work, two running a small convolution's pass
// 2.0x). So the unit of the sharing measurement is a training pass of the
// model itself, forward and backward of a random batch of kSharingRows rows,
// and it is counted for a fixed window: every process of a measurement
// computes for the whole window, so the figure is the node's throughput while
// all of them are busy.
constexpr std::int64_t kSharingRows = 32;

class SharingWork {
 public:
  explicit SharingWork(const zoo::ModelSpec& model)
      : g_(zoo::build_graph(model)), module_(g_), whole_(module_, graph::whole_graph(g_)),
        batch_(data::random_batch(g_, kSharingRows)) {}

  // Passes done per second over `window` seconds.
  double rate(double window) {
    std::int64_t units = 0;
    const auto t0 = Clock::now();
    while (since(t0) < window) unit(), ++units;
    return static_cast<double>(units) / since(t0);
  }

 private:
  void unit() {
    whole_.forward({}, batch_).at(g_.loss()).backward();
    for (auto& param : module_.parameters()) param.mutable_grad() = torch::Tensor();
  }

  graph::OpGraph g_;
  nn::GraphModule module_;
  nn::GraphExecutor whole_;
  nn::Batch batch_;
};

// The window of one sharing measurement.
double sharing_window(int repeats) { return 0.5 * repeats; }

const std::vector<std::int64_t> kMessageBytes{8, 1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20};

const std::vector<std::string> kCollectives{"allreduce", "alltoall", "allgather"};

nlohmann::json measure_links(const comm::Group& g, int repeats) {
  nlohmann::json out{{"processes", g.size()}};
  for (auto bytes : kMessageBytes) {
    const int reps = bytes >= (1 << 20) ? 4 * repeats : 10 * repeats;
    if (g.size() == 2) out["p2p"].push_back({bytes, ping_pong(g, bytes, reps)});
    for (const auto& op : kCollectives) out[op].push_back({bytes, collective(g, op, bytes, reps)});
  }
  if (g.size() == 2) make_non_decreasing(out["p2p"]);
  for (const auto& op : kCollectives) make_non_decreasing(out[op]);
  return out;
}

nlohmann::json measure_sharing(const comm::Group& g, const zoo::ModelSpec& model, int repeats) {
  SharingWork work(model);
  work.rate(0.05);  // warm up outside the window
  barrier(g);
  const double mine = work.rate(sharing_window(repeats));
  std::vector<at::Tensor> v{torch::zeros({g.size()}, torch::kFloat64)};
  v[0][g.rank()] = mine;
  wait(g.pg().allreduce(v), g);
  std::vector<double> all(v[0].data_ptr<double>(), v[0].data_ptr<double>() + g.size());
  return {{"processes", g.size()}, {"passes_per_s", all}};
}

// Adam over `tensors` tensors of `elements` floats each.
double adam_step(int tensors, std::int64_t elements, int repeats) {
  config::OptimizerConfig c;
  c.name = "adam";
  auto opt = optim::Optimizer::make(c);
  std::vector<torch::Tensor> params, grads;
  for (int i = 0; i < tensors; ++i) params.push_back(torch::randn({elements})), grads.push_back(torch::randn({elements}));
  return timed(repeats, [&] {
    for (int i = 0; i < tensors; ++i) opt->step("p" + std::to_string(i), params[i], grads[i], 1e-3);
  });
}

struct Calibration {
  const CalibrateOptions& o;
  const RunWorkers& run;
  std::ostream& out;
  int cores = usable_cores();
  nlohmann::json raw;
  cost::ClusterSpec c;

  // Worker processes of a measurement: --max-processes, else cores + 2
  // (at least 5, at most 8).
  int most_processes() const { return o.max_processes ? o.max_processes : std::min(8, std::max(5, cores + 2)); }

  void note(const std::string& what, double seconds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f s)", seconds);
    out << "calibrate: " << what << buf << std::endl;
  }

  nlohmann::json workers(const std::string& what, int nproc, const std::vector<std::string>& extra = {}) {
    const auto path = std::filesystem::temp_directory_path() / ("trident-calibrate-" + std::to_string(::getpid()) +
                                                                 "-" + what + "-" + std::to_string(nproc) + ".json");
    std::vector<std::string> args{"calibrate", "--worker", what, "--out", path.string(), "--repeats",
                                  std::to_string(o.repeats)};
    args.insert(args.end(), extra.begin(), extra.end());
    const int rc = run(nproc, args);
    if (rc != 0)
      throw Failure("calibrate: the " + what + " measurement on " + std::to_string(nproc) +
                    " processes failed (exit " + std::to_string(rc) + ")");
    auto doc = read_json_file<Failure>(path.string(), "calibration worker output");
    std::filesystem::remove(path);
    return doc;
  }

  void links() {
    const auto t0 = Clock::now();
    for (int p = 2; p <= most_processes(); ++p) {
      auto doc = workers("links", p);
      if (p == 2) raw["measured"]["p2p"]["2"] = doc["p2p"];
      for (const auto& op : kCollectives) raw["measured"][op][std::to_string(p)] = doc[op];
    }
    // Latency: the median one-way time of the small messages; bandwidth: the
    // large ones' bytes over their time beyond it. (A least-squares line
    // through all sizes lets one slow large message set the latency.)
    std::vector<double> small;
    double bytes = 0, seconds = 0;
    for (const auto& e : raw["measured"]["p2p"]["2"]) {
      const double b = e[0].get<double>(), t = e[1].get<double>();
      if (b <= 16 << 10) small.push_back(t);
      if (b >= 256 << 10) bytes += b, seconds += t;
    }
    c.intra_node.latency_s = std::max(1e-6, median(small));
    c.intra_node.bandwidth = bytes / std::max(1e-9, seconds - 3 * c.intra_node.latency_s);
    auto table = [](const nlohmann::json& rows) {
      cost::LinkSpec::Table t;
      for (const auto& e : rows) t.emplace_back(e[0].get<double>(), e[1].get<double>());
      return t;
    };
    for (const auto& [op, by_ranks] : raw["measured"].items())
      for (const auto& [p, rows] : by_ranks.items()) c.intra_node.measured[op][std::stoi(p)] = table(rows);
    raw.erase("measured");  // kept once, in the link
    c.inter_node = c.intra_node;
    note("links: Gloo point-to-point " + std::to_string(static_cast<int>(c.intra_node.latency_s * 1e6)) +
             " us + bytes / " + std::to_string(c.intra_node.bandwidth / 1e9).substr(0, 4) + " GB/s",
         since(t0));
  }

  // See Note [Core throughput]: X(k) = the passes k processes do per second
  // together over the passes one does alone. The lone rate is measured
  // before and after each k and averaged, so that a slow phase of the
  // machine (minutes long on a shared host) moves both sides of the ratio.
  std::vector<double> sharing(const zoo::ModelSpec& m) {
    process::configure_process(1);
    SharingWork work(m);
    work.rate(0.05);
    double alone = work.rate(sharing_window(o.repeats));
    std::vector<double> x{1.0};
    nlohmann::json doc{{"model", m.name + "/" + m.preset}, {"alone_passes_per_s", {alone}}};
    for (int k = 2; k <= std::min(cores + 2, most_processes()); ++k) {
      auto together = workers("sharing", k, {"--models", m.name + "/" + m.preset});
      const double after = work.rate(sharing_window(o.repeats));
      double sum = 0;
      for (double rate : together["passes_per_s"].get<std::vector<double>>()) sum += rate;
      x.push_back(std::clamp(sum / (0.5 * (alone + after)), 0.05, static_cast<double>(k)));
      doc["alone_passes_per_s"].push_back(after);
      doc["together_passes_per_s"].push_back(together["passes_per_s"]);
      alone = after;
    }
    doc["core_throughput"] = x;
    raw["sharing"].push_back(doc);
    return x;
  }

  // The machine's figure for models without their own: the median of each
  // entry over the calibrated models.
  void machine_throughput() {
    std::vector<std::vector<double>> by_k;
    for (const auto& [key, profile] : c.profiles)
      for (std::size_t k = 0; k < profile->core_throughput.size(); ++k) {
        if (by_k.size() <= k) by_k.resize(k + 1);
        by_k[k].push_back(profile->core_throughput[k]);
      }
    std::string figures;
    for (std::size_t k = 0; k < by_k.size(); ++k) {
      c.core_throughput.push_back(median(by_k[k]));
      figures += (k ? ", " : "") + std::to_string(k + 1) + ": " + format_number("%.2f", c.core_throughput[k]);
    }
    out << "calibrate: sharing " << cores << " cores, the work of k busy processes in units of one alone (median "
        << "over models): " << figures << std::endl;
  }

  void device() {
    const auto t0 = Clock::now();
    process::configure_process(1);
    auto& d = c.device;
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    d.name = std::string("process on ") + host;
    const auto a = torch::randn({512, 512}), b = torch::randn({512, 512});
    const double mm = timed(o.repeats, [&] { (void)torch::mm(a, b); });
    const auto a16 = a.to(torch::kBFloat16), b16 = b.to(torch::kBFloat16);
    const double mm16 = timed(o.repeats, [&] { (void)torch::mm(a16, b16); });
    d.peak_flops[graph::DType::kFloat32] = d.peak_flops[graph::DType::kFloat16] = 2.0 * 512 * 512 * 512 / mm;
    d.peak_flops[graph::DType::kBFloat16] = 2.0 * 512 * 512 * 512 / mm16;
    d.half_efficiency_flops = 1e6;
    // Adam: 7 passes over the bytes plus a launch per tensor (cost::optimizer_s).
    const double big = adam_step(8, 1 << 20, o.repeats), small = adam_step(256, 256, o.repeats);
    const double big_bytes = 8.0 * (1 << 20) * 4 * 7, small_bytes = 256.0 * 256 * 4 * 7;
    // t = n·launch + bytes/bw for both: two equations, two unknowns.
    const double per_byte = std::max(1e-13, (big - small * 8 / 256) / (big_bytes - small_bytes * 8 / 256));
    d.launch_s = std::max(1e-7, (small - small_bytes * per_byte) / 256);
    d.memory_bandwidth = 1 / per_byte;
    d.memory_bytes = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    raw["matmul_512_s"] = mm;
    raw["matmul_512_bf16_s"] = mm16;
    raw["onednn_isa"] = process::onednn_isa();
    raw["adam"] = {{"tensors_8x1M_s", big}, {"tensors_256x256_s", small}};
    note("device: matrix product " + std::to_string(static_cast<int>(d.peak(graph::DType::kFloat32) / 1e9)) +
             " GFLOP/s on one core (bf16 " + std::to_string(static_cast<int>(d.peak(graph::DType::kBFloat16) / 1e9)) +
             ", oneDNN " + process::onednn_isa() + "); optimizer " + std::to_string(static_cast<int>(d.memory_bandwidth / 1e9)) +
             " GB/s",
         since(t0));
  }

  // Per model: how its passes share the cores, then its op times at each
  // thread count, which carry that figure.
  void profiles() {
    std::vector<int> threads = o.threads;
    if (threads.empty()) threads = cores > 1 ? std::vector<int>{1, cores} : std::vector<int>{1};
    auto models = o.models;
    if (models.empty())
      for (const auto& name : zoo::model_names())  // a GNN's op times belong to its graph, not to the machine
        if (!zoo::is_gnn_model(name)) models.push_back({name, "tiny"});
    Progress bar(out, Progress::is_terminal(out), "profile");
    // bf16 too where the CPU multiplies it (emulated, it would take 10-20x as long to measure a rate nobody should train at).
    std::vector<graph::Precision> precisions{graph::Precision::kFp32};
    if (process::cpu_has_bf16()) precisions.push_back(graph::Precision::kBf16);
    const auto total = static_cast<std::int64_t>(models.size() * (threads.size() * precisions.size() + 1));
    std::int64_t done = 0;
    const auto t0 = Clock::now();
    auto step = [&](const std::string& what) {
      ++done;
      bar.update(done, total, done / std::max(1e-9, since(t0)), what, true);
    };
    for (const auto& m : models) {
      const auto name = m.name + "/" + m.preset;
      const auto throughput = sharing(m);
      step(name + " sharing the cores");
      for (int t : threads)
        for (auto precision : precisions) {
          ProfileOptions po;
          po.rows = o.rows, po.repeats = o.repeats, po.threads = t, po.precision = precision;
          auto p = profile_model(m, po);
          p.core_throughput = throughput;
          const auto key = cost::profile_key(m.name, m.preset, t, precision);
          c.profiles[key] = std::make_shared<const cost::Profile>(std::move(p));
          step(key);
        }
    }
    bar.finish();
    process::configure_process(1);
    machine_throughput();
  }
};

std::string now_text() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", std::localtime(&t));
  return buf;
}

}  // namespace

cost::ClusterSpec calibrate(const CalibrateOptions& o, const RunWorkers& run_workers, std::ostream& out) {
  if (o.repeats < 1) throw InputError("calibrate: --repeats must be >= 1, got " + std::to_string(o.repeats));
  if (o.max_processes == 1 || o.max_processes < 0)
    throw InputError("calibrate: --max-processes must be >= 2, got " + std::to_string(o.max_processes));
  Calibration cal{o, run_workers, out};
  cal.c.name = "auto";
  cal.c.cores_per_node = cal.cores;
  cal.c.devices_per_node = 64, cal.c.nodes = 1;
  const auto t0 = Clock::now();
  cal.device();
  cal.links();
  cal.profiles();
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  cal.raw["host"] = host;
  cal.raw["cores"] = cal.cores;
  cal.raw["created"] = now_text();
  cal.raw["seconds"] = since(t0);
  cal.c.calibration = cal.raw;
  return cal.c;
}

void calibration_worker(const std::string& what, const std::string& out_path, int repeats,
                        const std::vector<zoo::ModelSpec>& models) {
  process::configure_process(1);
  const auto world = comm::world_from_env();
  auto group = comm::Group::connect(world, std::chrono::seconds(60));
  nlohmann::json doc;
  if (what == "links") doc = measure_links(group, repeats);
  else if (what == "sharing" && models.size() == 1) doc = measure_sharing(group, models[0], repeats);
  else if (what == "sharing") throw InputError("calibrate --worker sharing needs one model in --models");
  else throw InputError("calibrate --worker: '" + what + "' is unknown; allowed: links, sharing");
  barrier(group);
  if (group.rank() == 0) write_file_atomic(out_path, doc.dump() + "\n");
}

}  // namespace trident::measure
