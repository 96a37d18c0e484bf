#include "trident/runtime/trainer.h"

#include "sampled_graph.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <thread>

#include "trident/base/test_hooks.h"
#include "trident/base/files.h"
#include "trident/base/hash.h"
#include "trident/base/text.h"
#include "trident/sync/grad_sync.h"
#include "trident/report/plan_tables.h"
#include "trident/process/blas.h"
#include "trident/process/process.h"
#include "trident/base/cache_dir.h"
#include "trident/data/npy.h"
#include "trident/data/streams.h"
#include "trident/data/tokens.h"
#include "trident/images/transforms.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/nn/graph_executor.h"
#include "trident/nn/node_chunks.h"
#include "trident/zoo/zoo.h"
#include "trident/base/progress.h"

namespace trident::runtime {

// The config parser is torch-free (it is fuzzed on its own), so the link
// between its default and comm's is checked here.
namespace {


std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}


// The dataset fields in `fields` (plus the labels, which give every rank the
// global batch's loss divisor): a stage keeps only what it reads
// (docs/design.md, contract "The run keeps the plan"). Streamed data
// (images, tar, token files) keeps only its index; .npy arrays are mapped.
data::Sources load_data(const config::TrainConfig& c, const graph::OpGraph& g, std::set<std::string> fields) {
  fields.insert("label");
  const auto ends_with = [](const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (c.data.name == "fashion-mnist")
    return data::in_memory(data::load_fashion_mnist(c.data.path, c.data.train_size, c.data.test_size, fields));
  if (c.data.name == "npy") return data::in_memory(data::map_npy(c.data.train, c.data.test, fields));
  if (c.data.name == "tokens") {
    if (ends_with(c.data.train, ".bin") || ends_with(c.data.test, ".bin"))
      return {data::open_token_file(g, c.data.train), data::open_token_file(g, c.data.test)};
    return data::in_memory(data::load_tokens(g, c.data.train, c.data.test, fields));
  }
  if (c.data.name == "images" || c.data.name == "tar") {
    auto options = data::image_input(g);
    options.seed = static_cast<std::uint64_t>(c.train.seed);
    auto split = [&](const std::string& path, const std::string& list, bool training) {
      auto o = options;
      const auto text = list.empty() ? data::default_transforms(o.channels, o.height, o.width, training)
                                     : nlohmann::json::parse(list);
      o.transforms = images::parse_transforms(text, training ? "data.transforms" : "data.eval_transforms");
      return data::open_images(c.data.name, path, o, cache_dir());
    };
    return {split(c.data.train, c.data.transforms, true), split(c.data.test, c.data.eval_transforms, false)};
  }
  if (c.data.name == "graph")
    return data::in_memory(data::load_graph_dataset(c.model.graph.empty() ? "csbm" : c.model.graph, c.data.eval,
                                                    fields, c.model.graph_chunks));
  auto s = data::make_synthetic(g, c.data.train_size, c.data.test_size, c.train.seed);
  for (auto* split : {&s.train, &s.test})
    for (auto it = split->fields.begin(); it != split->fields.end();)
      it = fields.count(it->first) ? std::next(it) : split->fields.erase(it);
  return data::in_memory(std::move(s));
}

// Decoding threads: data.workers, or half of this process's compute
// threads (at least 1) for streamed data; none for data held in memory.
int loader_workers(const config::TrainConfig& c, const data::Source& train, int threads) {
  if (!train.streams()) return 0;
  return c.data.workers ? static_cast<int>(c.data.workers) : std::max(1, threads / 2);
}

// FNV-1a of the bytes of row `row` of `t`.
std::uint64_t row_hash(const torch::Tensor& t, std::int64_t row) {
  const auto r = t[row].contiguous();
  return fnv1a(r.data_ptr(), r.nbytes());
}

// Straggler injection for the staleness benchmark (bench/run_ssp.sh):
// TRIDENT_TEST_SLOW_STEP_MS=MS makes the rank whose number is the step's
// modulo the world size sleep MS milliseconds in that step, so each step
// has one straggler and each rank is the straggler every P-th step.
std::int64_t slow_step_ms() {
  static const std::int64_t ms = test_hooks::slow_step_ms();  // See Note [Test hooks]
  return ms;
}

}  // namespace

std::atomic<bool>& Trainer::stop_requested() {
  static std::atomic<bool> flag{false};
  return flag;
}

Trainer::~Trainer() = default;

// See Note [Errors]: an error while the trainer is being built says which
// rank, stage and phase it came from, as errors in the loop do.
void Trainer::phase(const char* name, const std::function<void()>& run) {
  try {
    run();
  } catch (Error& e) {
    auto where_now = where();
    where_now.action = name;
    e.add_context(where_now);
    throw;  // the error's own type: callers catch ConfigError, TrainingError, ...
  }
}

Trainer::Trainer(config::TrainConfig config, bool resume, std::ostream& out, std::optional<comm::Group> world)
    : config_(std::move(config)), out_(out) {
  rank_ = world ? world->rank() : comm::world_from_env().rank;  // until join() confirms it
  graph::OpGraph graph;
  phase("model", [&] { graph = zoo::build_graph(config_.model); });
  classifies_ = graph::OpGraph::classifies(graph.op(graph.loss()).kind);
  if (config_.train.label_smoothing > 0) {
    if (!classifies_)
      throw config::ConfigError("train.label_smoothing = " + fixed(config_.train.label_smoothing, 3) + ": the model's loss is " +
                                graph.op(graph.loss()).kind + "; label smoothing applies to cross_entropy");
    graph.set_attr(graph.loss(), "label_smoothing", config_.train.label_smoothing);
  }
  loss_op_ = graph.op(graph.loss());
  run_dir_ = (std::filesystem::path(config_.runs_dir) / config_.name).string();
  placement_ = executor::Placement::choose(config_.train.device, comm::world_from_env().local_rank);
  clock_ = placement_.clock();
  phase("join", [&] { join(std::move(world)); });
  threads_ = process::choose_threads(static_cast<int>(config_.train.threads), usable_cores(), local_processes_);
  process::configure_process(threads_.threads);
  if (resume && !std::filesystem::exists(run_dir_))
    throw config::ConfigError("--resume " + run_dir_ + ": no such run directory");
  if (leader()) std::filesystem::create_directories(run_dir_);
  phase("plan agreement", [&] { agree_on_plan(graph); });
  phase("stage build", [&] { build_stage(graph); });
  for (const auto& op : graph.ops())  // See Note [Node chunks]
    if (op.kind == "graph_aggregate" && op.attrs.value("chunks", 0) > 1) chunked_ops_.push_back(op.name);
  phase("data load", [&] {
    auto fields = stage_->fields();
    fields.insert("label");
    if (SampledGraph::applies(graph)) {  // See Note [Sampled blocks]
      sampled_ = std::make_unique<SampledGraph>(config_, graph, threads_.threads);
      data_ = sampled_->seeds();
      std::vector<int> everyone(static_cast<std::size_t>(size_));
      std::iota(everyone.begin(), everyone.end(), 0);
      sampled_->shard(group_->subgroup(everyone, "features"));
      stage_->set_blocks([this](const torch::Tensor& nodes, bool training) {
        return nn::on_device(sampled_->blocks(nodes, training), placement_.device());
      });
    } else {
      data_ = load_data(config_, graph, fields);
    }
    data_.train->check_fits(graph, fields);
  });
  sampler_ = std::make_unique<data::EpochSampler>(data_.train->size(), config_.train.mini_batch, config_.train.seed,
                                                  !data_.train->in_order());
  sample_log_ = test_hooks::sample_log_dir();  // See Note [Test hooks]
  data::LoaderOptions loading;
  loading.workers = loader_workers(config_, *data_.train, threads_.threads);
  loading.prefetch = static_cast<int>(config_.data.prefetch);
  loading.skip_bad = config_.data.on_bad_sample == "skip";
  loader_ = std::make_unique<data::Loader>(
      data_.train, [this](std::int64_t step) { return sampler_->batch_indices(step); },
      [this](std::int64_t step) { return sampler_->epoch_of(step); }, loading);
  total_steps_ = config_.train.steps ? config_.train.steps : config_.train.epochs * sampler_->steps_per_epoch();
  optimizer_ = optim::Optimizer::make(config_.optimizer);
  if (resume) {
    phase("resume", [&] { load(run_dir_); });
  } else if (leader()) {
    std::ofstream(run_dir_ + "/metrics.jsonl", std::ios::trunc);
  }
  if (leader()) write_file_atomic(run_dir_ + "/config.yaml", config_.to_yaml());
}

// This rank's stage and nothing else (docs/design.md, contract "The run keeps the plan"): its modules, with
// weights from (seed, name), its executor and its replicas' gradient sync.
void Trainer::build_stage(const graph::OpGraph& graph) {
  std::set<graph::OpId> ops;
  const int stage = plan::stage_of_devices(plan_).at(rank_);
  if (stage >= 0)
    for (const auto& name : plan_.stages[stage].ops) ops.insert(graph.id_of(name));
  check_memory_limit(stage);
  try {
    module_ = std::make_shared<nn::GraphModule>(graph, config_.train.seed, ops);
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("allocate") == std::string::npos) throw;
    throw TrainingError("out of memory building the stage's " + std::to_string(ops.size()) +
                        " ops (the plan needs " + human_bytes(stage >= 0 ? plan_.stages[stage].memory_bytes : 0) +
                        " per device): " + first_line(e),
                        ErrorKind::kFailure, where());
  }
  if (!config_.model.weights.empty()) nn::load_weights(*module_, config_.model.weights);  // See Note [User weights]
  module_->set_precision(graph::precision_from_string(config_.train.precision).value());  // checked by the config
  placement_.place(*module_);
  stage_ = std::make_unique<executor::StageExecutor>(*module_, plan_, *group_, placement_);
  const auto& par = config_.parallel;
  tied_ = std::make_unique<executor::TiedSync>(plan_, graph, *group_, stage_->params());
  sync_ = executor::make_stage_sync(*stage_, plan_, *group_, static_cast<std::int64_t>(par.bucket_mb * 1024 * 1024),
                                    static_cast<int>(par.staleness), tied_->names(),
                                    par.comm_dtype == "bf16" ? torch::kBFloat16 : torch::kFloat);  // checked by the config
}

// Before allocating: a stage whose planned memory exceeds what this process
// may still map (its address-space limit, e.g. `prlimit --as`) fails with
// one line naming both, instead of dying in an allocation.
void Trainer::check_memory_limit(int stage) const {
  if (stage < 0) return;
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return;
  const double need = plan_.stages[stage].memory_bytes;
  const double left = static_cast<double>(lim.rlim_cur) - static_cast<double>(mapped_bytes());
  if (need <= left) return;
  throw TrainingError("out of memory: the plan needs " + human_bytes(need) +
                      " per device for this stage (weights, gradients, optimizer state, activations) but this "
                      "process may map only " + human_bytes(std::max(0.0, left)) + " more (address-space limit " +
                      human_bytes(static_cast<double>(lim.rlim_cur)) + "); pipeline the model over more processes, "
                      "e.g. --set parallel.devices=4 --set parallel.partitioner=pipedream",
                      ErrorKind::kFailure, where());
}

Evaluation Trainer::evaluate(const data::Source& split) {
  if (sync_) sync_->flush();  // pending PS pulls: the replicas hold the same weights
  const std::int64_t n = split.size();
  auto source = [&](std::int64_t begin, std::int64_t end, const std::set<std::string>& fields) {
    return placement_.batch(loader_->read(split, torch::arange(begin, end, torch::kInt64), fields, 0));
  };
  const auto r = stage_->evaluate(source, n);
  const double divisor = nn::loss_divisor(loss_op_, split.read(torch::arange(n), {"label"}, 0).at("label"));
  const auto total = sum_over_ranks({r.loss_sum, r.correct});
  return {total[0] / divisor, total[1] / divisor};
}

// See Note [Test hooks]: TRIDENT_TEST_SAMPLE_LOG, a line per sample given.
void Trainer::log_samples(const torch::Tensor& ids, const data::Batch& batch, std::int64_t step) const {
  std::string lines;
  for (std::int64_t r = 0; r < ids.size(0); ++r)
    for (const auto& [field, t] : batch)
      lines += std::to_string(step) + " " + std::to_string(ids[r].item<std::int64_t>()) + " " + field + " " +
               std::to_string(row_hash(t, r)) + "\n";
  std::ofstream(sample_log_ + "/samples.rank" + std::to_string(rank_) + ".txt", std::ios::app) << lines;
}

// The banner's word on precision: nothing for fp32; for bf16 on a CPU that
// multiplies bf16 only by emulation, that it will be slower.
std::string Trainer::precision_note() const {
  if (config_.train.precision == "fp32") return "";
  if (placement_.device().is_cpu() && !process::cpu_has_bf16())
    return ", " + config_.train.precision + " (this CPU has neither AVX512-BF16 nor AMX: bf16 products are emulated, "
           "several times slower than fp32)";
  return ", " + config_.train.precision;
}

// The banner's word on a streamed dataset's loader: its threads and steps ahead.
std::string Trainer::loader_note() const {
  const int w = loader_->workers();
  if (!w) return "";
  return ", " + std::to_string(w) + (w == 1 ? " decoding thread" : " decoding threads") + " (data.workers), " +
         std::to_string(config_.data.prefetch) + " steps ahead";
}

// The first line of a run: what trains, on what, where.
std::string Trainer::banner() const {
  std::string layout;
  if (size_ > 1 && plan_.stages.size() == 1 && sync_)
    layout = ", " + std::to_string(size_) + " processes, data parallel, gradient sync " + sync_->name();
  else if (size_ > 1)
    layout = ", " + std::to_string(size_) + " processes, " + plan_.partitioner + " plan of " +
             std::to_string(plan_.stages.size()) + " stages, " + report::micro_batch_summary(plan_) + ", " +
             plan_.schedule;
  if (plan_.pipeline_delay) layout += ", pipeline delay 1 (PipeDream-2BW: no flush between steps)";
  const auto model = config_.model.file.empty() ? config_.model.name + "/" + config_.model.preset
                                                 : config_.model.name + " (" + config_.model.file + ")";
  return "trident: training " + model + " on " + config_.data.name + " (" +
         std::to_string(data_.train->size()) + " samples" + loader_note() + "), " + std::to_string(total_steps_) + " steps of " +
         std::to_string(config_.train.mini_batch) + ", " + config_.optimizer.name + " lr " +
         fixed(config_.optimizer.lr, 4) + precision_note() +
         ", " + std::to_string(threads_.threads) +
         (threads_.threads == 1 ? " thread (" : " threads (") + threads_.reason + ")" + layout + "; BLAS " +
         process::blas_in_use().describe() + "; ATen kernels " + process::aten_kernels() + "; run dir " + run_dir_ + (step_ ? "; resumed at step " + std::to_string(step_) : "");
}

// One optimizer step of every plan: this rank's stage runs its schedule
// over the global batch, its replicas sync, the optimizer steps; then one
// small collective gives every rank the global loss (for the non-finite
// check), the correct count and the same stop decision after Ctrl-C.
Trainer::StepTotals Trainer::step(double lr, executor::TraceLog& trace) {
  const auto indices = sampler_->batch_indices(step_);
  // Every rank holds the labels (data load): the global batch's count of
  // samples or counted tokens (see Note [Token losses] in graph/op_graph.h).
  const double divisor =
      nn::loss_divisor(loss_op_, data_.train->read(indices, {"label"}, sampler_->epoch_of(step_)).at("label"));
  auto source = [&](std::int64_t begin, std::int64_t end, const std::set<std::string>& fields) {
    // See Note [Delayed pipelines]: rows past the mini-batch are the next step's.
    const auto mini = config_.train.mini_batch;
    if (begin >= mini) {
      auto batch = loader_->rows(step_ + 1, begin - mini, end - mini, fields);
      if (!sample_log_.empty()) log_samples(sampler_->batch_indices(step_ + 1).slice(0, begin - mini, end - mini), batch, step_ + 1);
      return placement_.batch(std::move(batch));
    }
    auto batch = loader_->rows(step_, begin, end, fields);
    if (!sample_log_.empty()) log_samples(indices.slice(0, begin, end), batch, step_);
    if (sampled_ && !block_rows_learnt_) block_rows_.emplace_back(begin, end);
    return placement_.batch(std::move(batch));
  };
  if (sampled_) sampled_->set_step(step_, sampler_->epoch_of(step_)), prefetch_blocks();
  const auto start = executor::now_us();
  const auto sent_before = stage_->bytes_sent();
  const auto reads_before = local_chunk_reads();
  stage_->set_random_key(config_.train.seed, step_);
  const bool drain = drains(step_);
  stage_->set_drain(drain);
  if (slow_step_ms() && step_ % size_ == rank_) std::this_thread::sleep_for(std::chrono::milliseconds(slow_step_ms()));
  const auto r = stage_->run(source, divisor, [this, lr] { arm_sync(lr); }, &trace);
  block_rows_learnt_ = true;
  StepTotals t;
  stage_->begin_update();  // See Note [Weight versions]; nothing without a delay
  const auto stepped = sync_and_step(lr, trace);
  if (sampled_) sampled_->update_embeddings(lr);  // See Note [Sparse Adagrad]
  t.exposed_s = stepped.exposed_s, t.grad_norm = stepped.grad_norm;
  if (sync_) t.read_staleness = sync_->stats().read_staleness;
  const auto bad = static_cast<double>(loader_->bad().size());
  std::vector<double> values{r.loss_sum / divisor, r.correct / divisor, stop_requested().load() ? 1.0 : 0.0,
                             static_cast<double>(stage_->bytes_sent() - sent_before), bad - bad_reported_};
  bad_reported_ = bad;
  const auto reads = local_chunk_reads();
  for (std::size_t i = 0; i < reads.size(); ++i) values.push_back(reads[i] - reads_before[i]);
  const auto global = sum_step(std::move(values));
  trace.add("step " + std::to_string(step_), "step", executor::kCommLane, start, executor::now_us());
  trace.resolve();
  if (!std::isfinite(global.loss))
    throw TrainingError("step " + std::to_string(step_) + ": loss is " + std::to_string(global.loss) +
                        "; lower optimizer.lr (now " + fixed(lr, 6) + ") or check the data");
  t.loss = global.loss, t.correct = global.correct, t.stop = global.stop, t.steps = global.steps;
  if (stage_->delayed() && !drain && (t.stop || stop_pending_)) {  // stop after the next step, which drains
    stop_pending_ = true;
    t.stop = false;
  }
  t.p2p_bytes = global.p2p_bytes, t.chunk_reads = global.chunk_reads, t.bad_samples = global.bad_samples;
  t.data_wait_s = loader_->take_wait_s();
  return t;
}

// See Note [Delayed pipelines]: a step drains before evaluation, a
// checkpoint, the end, and a stop every rank has seen; else it hands over
// to the next one. Every rank decides alike.
bool Trainer::drains(std::int64_t step) const {
  const auto next = step + 1;
  const auto every = config_.checkpoint.every;
  return next >= total_steps_ || stop_pending_ || (config_.train.eval && next % sampler_->steps_per_epoch() == 0) ||
         (every && next % every == 0);
}

// See Note [Sampled blocks]: the next step's blocks, sampled on a thread
// while this step runs, for the rows the micro-batches read (learnt in the
// first step).
void Trainer::prefetch_blocks() {
  const auto next = step_ + 1;
  if (block_rows_.empty() || next >= total_steps_) return;
  const auto epoch = sampler_->epoch_of(next);
  const auto nodes = data_.train->read(sampler_->batch_indices(next), {"node"}, epoch).at("node");
  std::vector<torch::Tensor> parts;
  for (const auto& [begin, end] : block_rows_) parts.push_back(nodes.slice(0, begin, end));
  sampled_->prefetch(next, std::move(parts), epoch);
}

// A metrics line for the logging window that ends at this step; data-parallel
// and replicated stages add rank 0's communication figures: bytes it sent
// per iteration (by the algorithms' formulas; the same every iteration) and
// communication left after backward ended; the first time, the same per
// parameter on a line of its own.
void Trainer::write_window(const WindowMetrics& w, double lr, double steps_per_s) {
  const auto batch = config_.train.mini_batch;
  nlohmann::json line{{"step", step_},
                      {"epoch", sampler_->epoch_of(step_ - 1)},
                      {"loss", w.mean_loss()},
                      {"lr", lr},
                      {"samples_per_s", steps_per_s * batch},
                      {"wall_s", wall_s()}};
  if (classifies_) line["accuracy"] = w.accuracy();
  if (w.summed != w.steps) line["summed_steps"] = w.summed;  // See Note [Lagged step totals]
  if (sync_) {
    if (!comm_bytes_logged_) {
      nlohmann::json per;
      for (const auto& [name, sent] : sync_->stats().sent)
        per[name] = {{"sent", sent}, {"received", sync_->stats().received.at(name)}};
      append_metrics(nlohmann::json{{"step", step_}, {"comm_bytes_per_param", per}}.dump());
      comm_bytes_logged_ = true;
    }
    double bytes = 0;
    for (const auto& [name, v] : sync_->stats().sent) bytes += v;
    line["comm_bytes_sent"] = bytes;
    line["exposed_comm_s"] = w.exposed / w.steps;
    if (config_.parallel.staleness > 0) line["read_staleness"] = w.staleness / w.steps;  // See Note [Server copy]
  }
  if (config_.optimizer.clip_norm > 0) line["grad_norm"] = w.grad_norm / w.steps;  // the mean, before clipping
  line["data_wait_s"] = w.data_wait / w.steps;  // rank 0's, per step (Note [Loader])
  if (loader_->workers()) {
    const auto samples = loader_->samples_read();
    const double read_s = loader_->read_seconds();
    if (read_s > window_read_s_)  // samples per second of one worker's time: the loader's rate per thread
      line["data_samples_per_worker_s"] = (samples - window_samples_) / (read_s - window_read_s_);
    window_samples_ = samples, window_read_s_ = read_s;
  }
  if (w.bad_samples > 0) line["bad_samples"] = w.bad_samples;
  if (sampled_) {  // See Note [Sampled blocks]: per step, the mean over the processes (every rank ends a window)
    const auto s = sampled_->take_stats();
    const double n = static_cast<double>(std::max<std::int64_t>(1, w.steps)) * size_;
    const auto v = sum_over_ranks({static_cast<double>(s.rows.local_rows), static_cast<double>(s.rows.remote_rows),
                                   static_cast<double>(s.rows.bytes_received), s.sample_s, s.fetch_s});
    line["sampled"] = {{"rows_local", v[0] / n}, {"rows_remote", v[1] / n}, {"feature_bytes", v[2] / n},
                       {"sample_s", v[3] / n}, {"fetch_s", v[4] / n}};
  }
  if (plan_.stages.size() > 1 || plan_.stages.front().partition == "nodes")  // stage edges, or halo rows
    line["p2p_bytes_per_step"] = w.p2p_bytes / std::max<std::int64_t>(1, w.summed);
  if (!chunked_ops_.empty()) {  // See Note [Node chunks]: the share of neighbour reads one epoch stale, per layer
    nlohmann::json share;
    for (std::size_t i = 0; i < chunked_ops_.size() && 2 * i + 1 < window_chunk_reads_.size(); ++i)
      share[chunked_ops_[i]] = window_chunk_reads_[2 * i] / std::max(1.0, window_chunk_reads_[2 * i + 1]);
    line["stale_read_share"] = share;
    window_chunk_reads_.clear();
  }
  append_metrics(line.dump());
}

TrainResult Trainer::run(std::optional<std::int64_t> stop_after) {
  try {
    return run_loop(stop_after);
  } catch (Error& e) {  // See Note [Errors]: every message says where it happened
    throw e.add_context(where());
  }
}

// See Note [Node chunks]: this rank's stale and total neighbour reads of
// each chunked aggregation its stage runs (zeros for the others').
std::vector<double> Trainer::local_chunk_reads() const {
  std::vector<double> out;
  if (chunked_ops_.empty()) return out;
  const auto reads = nn::chunk_reads();
  static const std::vector<std::string> none;
  const auto& ops = stage_->stage() < 0 ? none : plan_.stages[static_cast<std::size_t>(stage_->stage())].ops;
  for (const auto& name : chunked_ops_) {
    const auto it = reads.find(name);
    const bool mine = it != reads.end() && std::find(ops.begin(), ops.end(), name) != ops.end();
    out.push_back(mine ? static_cast<double>(it->second.stale) : 0);
    out.push_back(mine ? static_cast<double>(it->second.total()) : 0);
  }
  return out;
}

ErrorContext Trainer::where() const {
  ErrorContext c;
  c.rank = rank_;
  const auto of_devices = plan_.stages.empty() ? std::vector<int>{} : plan::stage_of_devices(plan_);
  const int stage = stage_ ? stage_->stage()
                           : rank_ < static_cast<int>(of_devices.size()) ? of_devices[static_cast<std::size_t>(rank_)]
                                                                         : -1;
  if (stage >= 0) {
    const auto& devices = plan_.stages[stage].devices;
    c.stage = stage;
    c.replica = static_cast<int>(std::find(devices.begin(), devices.end(), rank_) - devices.begin());
  }
  return c;
}

}  // namespace trident::runtime
