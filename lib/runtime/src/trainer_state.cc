// The Trainer's state on disk: sharded checkpoints (see Note [Sharded
// checkpoints] in sharded_checkpoint.h), metrics lines, and memory records.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "trident/base/test_hooks.h"
#include "trident/report/plan_tables.h"
#include "sampled_graph.h"
#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {

std::int64_t peak_rss_bytes() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<std::int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

std::int64_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t pages = 0;
  statm >> pages;
  return pages * ::sysconf(_SC_PAGESIZE);
}

void Trainer::append_metrics(const std::string& line) const {
  if (!leader()) return;
  const auto path = run_dir_ + "/metrics.jsonl";
  std::ofstream out(path, std::ios::app);
  out << line << "\n";
  if (!out.flush())  // a lost line is lost data: stop, saying why
    throw TrainingError("cannot append to " + path + ": " + std::strerror(errno));
}

// Note [Sharded optimizer state]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under the parameter server each replica
// holds the optimizer state of its block of a tensor only (see Note [Sharded
// parameter server] in sync/grad_sync.h); it writes each element-wise slot
// as "optim/<name>/<slot>@<begin>", the flat elements from `begin` on, and
// a scalar slot (Adam's step) whole from the replica whose block starts the
// tensor. A resume under any plan reassembles the slots and keeps what its
// own block, or its whole stage, needs.
Trainer::Shard Trainer::shard_of(const std::string& name) const {
  Shard s;
  if (!sync_) return s;
  if (auto span = sync_->shard(name)) s.sharded = true, s.span = *span;
  return s;
}

std::vector<std::pair<std::string, torch::Tensor>> Trainer::state_to_write() const {
  checkpoint::NamedTensors mine;
  for (const auto& [name, slots] : optimizer_->state()) {
    const auto shard = shard_of(name);
    if (!shard.sharded && stage_->replica() != 0) continue;
    for (const auto& [slot, t] : slots) {
      const auto key = "optim/" + name + "/" + slot;
      if (!shard.sharded)
        mine.emplace_back(key, t);
      else if (t.dim() > 0 && t.numel() == shard.span.size())
        mine.emplace_back(key + "@" + std::to_string(shard.span.begin), t);
      else if (shard.span.begin == 0 && shard.span.size() > 0)
        mine.emplace_back(key, t);
    }
  }
  return mine;
}

optim::ParamState Trainer::state_to_load(const checkpoint::CheckpointReader& ck, const std::string& name, const torch::Tensor& p) const {
  const auto shard = shard_of(name);
  if (shard.sharded && shard.span.size() == 0) return {};
  const auto prefix = "optim/" + name + "/";
  std::map<std::string, std::vector<std::string>> parts;  // slot -> its keys
  for (const auto& k : ck.keys(prefix)) {
    const auto rest = k.substr(prefix.size());
    parts[rest.substr(0, rest.find('@'))].push_back(k);
  }
  optim::ParamState state;
  for (const auto& [slot, keys] : parts) {
    torch::Tensor t;
    if (ck.has(prefix + slot)) {
      t = ck.read(prefix + slot);
    } else {
      t = torch::empty({p.numel()}, p.options().device(torch::kCPU).requires_grad(false));
      std::int64_t covered = 0;
      for (const auto& k : keys) {
        const auto part = ck.read(k).reshape(-1);
        const auto begin = std::stoll(k.substr(k.find('@') + 1));
        if (begin < 0 || begin + part.numel() > p.numel())
          throw TrainingError("--resume " + ck.path() + ": " + k + " lies outside parameter " + name + " (" +
                              std::to_string(p.numel()) + " elements)");
        t.narrow(0, begin, part.numel()).copy_(part);
        covered += part.numel();
      }
      if (covered != p.numel())
        throw TrainingError("--resume " + ck.path() + ": optimizer state " + prefix + slot + " covers " +
                            std::to_string(covered) + " of " + std::to_string(p.numel()) + " elements");
      t = t.view(p.sizes());
    }
    if (shard.sharded && t.dim() > 0) t = t.reshape(-1).narrow(0, shard.span.begin, shard.span.size()).clone();
    state[slot] = placement_.state(t);
  }
  return state;
}

namespace {

// Fault injection for the crash-safety test: TRIDENT_TEST_KILL_IN_SHARD=R:N
// makes rank R kill itself (SIGKILL) in the middle of writing its shard of
// the checkpoint at step N, after its first tensor.
bool kill_requested(int rank, std::int64_t step) {
  const auto hook = test_hooks::kill_in_shard();  // See Note [Test hooks]
  return hook && hook->rank == rank && hook->step == step;
}

}  // namespace

void Trainer::save(double wall_s) {
  if (sync_) sync_->flush();  // pending PS pulls: every replica holds the same weights
  const auto partial = checkpoint::partial_checkpoint_dir(run_dir_, step_);
  if (leader()) {
    std::error_code error;
    std::filesystem::remove_all(partial, error);  // left by a crash, if any
    if (!error) std::filesystem::create_directories(partial, error);
    if (error)
      throw checkpoint::CheckpointError("cannot create checkpoint directory " + partial + ": " + error.message() +
                                        " (the checkpoints before it are intact)",
                            ErrorKind::kFailure, where());
  }
  gather_strings("");  // the directory exists for every rank
  checkpoint::NamedTensors mine;
  if (stage_->stage() >= 0) {
    if (stage_->replica() == 0) {
      for (const auto& [name, p] : stage_->params()) mine.emplace_back("param/" + name, p);
      // See Note [Weight versions]: the older version, which the next step computes on.
      if (auto* versions = stage_->versions())
        for (auto& [name, w] : versions->older()) mine.emplace_back("delayed/" + name, w);
    }
    for (auto& entry : state_to_write()) mine.push_back(std::move(entry));
  }
  if (sampled_)  // See Note [Sparse Adagrad]: each rank's rows of the node embedding
    for (auto& entry : sampled_->embedding_entries()) mine.push_back(std::move(entry));
  const auto file = "rank-" + std::to_string(rank_) + ".bin";
  if (kill_requested(rank_, step_)) {
    checkpoint::write_shard(partial, file, checkpoint::NamedTensors(mine.begin(), mine.begin() + std::min<std::size_t>(1, mine.size())));
    ::kill(::getpid(), SIGKILL);
  }
  const auto entries = checkpoint::write_shard(partial, file, mine);
  const auto all = gather_strings(entries.dump());  // every shard is on disk
  if (!leader()) return;
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& text : all) tensors.update(nlohmann::json::parse(text));
  nlohmann::json manifest{{"wall_s", wall_s},
                          {"model", config_.model.name},
                          {"preset", config_.model.preset},
                          {"config", config_.to_yaml()},
                          {"plan", plan_.to_json()},
                          {"data", data_state()},
                          {"tensors", std::move(tensors)}};
  checkpoint::publish_checkpoint(run_dir_, step_, std::move(manifest), static_cast<int>(config_.checkpoint.keep));
}

namespace {

// Whether two plans place the same ops on the same devices in the same
// micro-batches (their predictions may differ).
bool same_layout(const plan::Plan& a, const plan::Plan& b) {
  if (a.devices != b.devices || a.stages.size() != b.stages.size()) return false;
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    const auto &x = a.stages[s], &y = b.stages[s];
    if (x.ops != y.ops || x.devices != y.devices || x.micro_batch != y.micro_batch || x.shares != y.shares) return false;
  }
  return true;
}

}  // namespace

// A resume under another plan than the checkpoint's (see Note [Elastic
// re-planning]) shows both, side by side.
void Trainer::show_plan_change(const checkpoint::CheckpointReader& ck) const {
  if (!ck.manifest().contains("plan")) return;  // a legacy checkpoint.pt
  plan::Plan before;
  try {
    before = plan::Plan::from_json(ck.manifest().at("plan"), ck.path() + "/manifest.json");
  } catch (const std::exception&) {
    return;  // the tensors were read by name; the old plan is only shown
  }
  if (same_layout(before, plan_)) return;
  out_ << "resuming step " << ck.step() << " under another plan than the checkpoint's; each rank reads its stage's "
       << "tensors from it\n"
       << report::side_by_side(before, "the checkpoint's plan", plan_, "this run's plan") << std::flush;
}

// Each rank reads only the tensors of its own stage, whatever plan wrote them.
void Trainer::load(const std::string& run_dir) {
  checkpoint::CheckpointReader ck;
  try {
    ck = checkpoint::CheckpointReader::latest(run_dir);
  } catch (const checkpoint::CheckpointError& e) {
    throw TrainingError(std::string("--resume ") + run_dir + ": " + e.what());
  }
  torch::NoGradGuard no_grad;
  std::map<std::string, optim::ParamState> state;
  try {
    for (auto [name, p] : stage_->params()) {
      const auto key = "param/" + name;
      if (!ck.has(key)) throw TrainingError("--resume " + ck.path() + ": the checkpoint lacks parameter " + name);
      const auto t = ck.read(key);
      if (t.sizes() != p.sizes())
        throw TrainingError("--resume " + ck.path() + ": parameter " + name + " has shape " + c10::str(t.sizes()) +
                            " in the checkpoint but " + c10::str(p.sizes()) + " in the model");
      p.copy_(t);
      if (auto slots = state_to_load(ck, name, p); !slots.empty()) state[name] = std::move(slots);
    }
  } catch (const checkpoint::CheckpointError& e) {
    throw TrainingError(std::string("--resume: ") + e.what());
  }
  optimizer_->load_state(std::move(state));
  if (sampled_) sampled_->load_embeddings(ck);
  step_ = ck.step();
  load_older_weights(ck);
  check_data_state(ck);
  if (leader()) show_plan_change(ck);
  wall_offset_s_ = ck.manifest().value("wall_s", 0.0);
}

// See Note [Weight versions]: a delayed run resumes with the checkpoint's
// older version where it has one (a delayed run's); from a synchronous
// checkpoint both versions start equal, as W(−1) = W(0) at the start.
void Trainer::load_older_weights(const checkpoint::CheckpointReader& ck) {
  auto* versions = stage_->versions();
  if (!versions) return;
  versions->reset(step_);
  std::map<std::string, torch::Tensor> older;
  for (const auto& [name, p] : stage_->params())
    if (ck.has("delayed/" + name)) older[name] = ck.read("delayed/" + name).to(p.device());
  if (older.empty()) return;
  if (older.size() != stage_->params().size())
    throw TrainingError("--resume " + ck.path() + ": the checkpoint holds the older weight version of " +
                        std::to_string(older.size()) + " of this stage's " + std::to_string(stage_->params().size()) +
                        " parameters");
  versions->load_older(older);
}

// Note [Data in checkpoints]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Which samples a step reads is the sampler's pure function of (seed,
// epoch, dataset size) and the step, and each sample's bytes a pure
// function of (seed, epoch, sample id) (Note [Sources]); so the optimizer
// step is the whole cursor, on any process count or plan. The manifest
// records it (epoch, step in the epoch) with what it depends on — the
// seed, the global batch, the training split's size and identity (its
// index's hash) — and a resume refuses a dataset whose size or identity
// changed, which would silently train on other batches.
nlohmann::json Trainer::data_state() const {
  char identity[32];
  std::snprintf(identity, sizeof identity, "%016llx", static_cast<unsigned long long>(data_.train->identity()));
  return {{"name", config_.data.name},
          {"samples", data_.train->size()},
          {"identity", identity},
          {"seed", config_.train.seed},
          {"mini_batch", config_.train.mini_batch},
          {"epoch", step_ > 0 ? sampler_->epoch_of(step_) : 0},
          {"step_in_epoch", step_ % sampler_->steps_per_epoch()}};
}

void Trainer::check_data_state(const checkpoint::CheckpointReader& ck) const {
  if (!ck.manifest().contains("data")) return;  // written before the data path recorded it
  const auto was = ck.manifest().at("data"), now = data_state();
  for (const char* key : {"samples", "identity", "seed", "mini_batch"})
    if (was.value(key, nlohmann::json()) != now.at(key))
      throw TrainingError("--resume " + ck.path() + ": the training data's " + key + " was " + was.value(key, nlohmann::json()).dump() +
                          " at the checkpoint and is " + now.at(key).dump() + " now (data.train = " + config_.data.train +
                          "); resuming would train on other batches than the run began with — restore the data, or "
                          "start a new run", ErrorKind::kBadInput);
}

// Every rank's peak resident memory beside its stage's planned memory
// (docs/design.md, contract "The run keeps the plan"), one metrics line.
void Trainer::record_memory() {
  const int stage = stage_->stage();
  nlohmann::json mine{{"rank", rank_},
                      {"stage", stage},
                      {"replica", stage_->replica()},
                      {"peak_rss_bytes", peak_rss_bytes()},
                      {"planned_bytes", stage >= 0 ? plan_.stages[stage].memory_bytes : 0.0}};
  if (placement_.on_gpu()) mine["peak_gpu_bytes"] = placement_.peak_device_bytes();
  if (stage_->delayed()) mine["weight_versions"] = stage_->most_versions();  // Note [Weight versions]: at most 2
  if (sampled_) {  // See Note [Row store]: this rank's shard of the features, and its resident memory now
    mine["feature_bytes_held"] = sampled_->held_bytes();
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0, resident = 0;
    statm >> size >> resident;
    mine["rss_bytes"] = resident * ::sysconf(_SC_PAGESIZE);
  }
  const auto all = gather_strings(mine.dump());
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& text : all) ranks.push_back(nlohmann::json::parse(text));
  append_metrics(nlohmann::json{{"step", step_}, {"memory", ranks}}.dump());
}

}  // namespace trident::runtime
