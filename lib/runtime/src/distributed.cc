// The data-parallel half of the Trainer: rendezvous, preflight, gradient
// sync selection (HybComm), and the few collectives the training loop needs.
#include <unistd.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "trident/cost/cluster.h"
#include "trident/cost/comm.h"
#include "trident/runtime/trainer.h"

namespace trident::runtime {
namespace {

std::string shape_of(const torch::Tensor& t) {
  std::string s;
  for (auto d : t.sizes()) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

}  // namespace

void Trainer::connect() {
  const auto& par = config_.parallel;
  if (world_.world_size != par.devices) {
    throw ConfigError("parallel.devices = " + std::to_string(par.devices) + " but the launcher started " +
                      std::to_string(world_.world_size) + " process(es) (" + world_.launcher +
                      "); start it with `trident train --nproc " + std::to_string(par.devices) +
                      " ...` or `trident launch --nproc " + std::to_string(par.devices) + " -- train ...`");
  }
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(par.timeout_s * 1000));
  group_ = comm::Group::connect(world_, timeout);
  // Preflight: a tiny all-reduce proves every rank is connected.
  auto probe = torch::ones({1});
  std::vector<at::Tensor> t{probe};
  try {
    group_->pg().allreduce(t)->wait(timeout);
  } catch (const std::exception& e) {
    throw comm::CommError("rank " + std::to_string(world_.rank) + ": preflight all-reduce failed: " + comm::one_line(e));
  }
  if (probe.item<double>() != world_.world_size)
    throw comm::CommError("preflight all-reduce gave " + std::to_string(probe.item<double>()) + ", expected " +
                          std::to_string(world_.world_size));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  out_ << "rank " << world_.rank << "/" << world_.world_size << " on " << host << " (pid " << getpid()
       << "), rendezvous " << world_.master_addr << ":" << world_.master_port << " ok" << std::endl;
  // Every rank starts from rank 0's weights (also after a resume).
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : params_) {
      std::vector<at::Tensor> w{p.detach()};
      group_->pg().broadcast(w)->wait(timeout);
    }
  }
  const auto bucket = static_cast<std::int64_t>(par.bucket_mb * 1024 * 1024);
  if (pipelined()) {
    // Each rank runs one stage replica; replicas sync by the plan's methods.
    stage_ = std::make_unique<StageExecutor>(*module_, *plan_, *group_);
    sync_ = make_stage_sync(*stage_, *plan_, *group_, bucket, static_cast<int>(par.staleness));
    return;
  }
  const auto& g = module_->graph();
  if (par.grad_sync == "allreduce" && par.sync.empty()) {
    sync_ = comm::make_allreduce_sync(*group_, params_, bucket);
  } else if (par.grad_sync == "ps" && par.sync.empty()) {
    sync_ = comm::make_ps_sync(*group_, params_, static_cast<int>(par.staleness));
  } else {
    sync_ = comm::make_hybrid_sync(*group_, params_, g, sync_methods(), bucket, static_cast<int>(par.staleness));
  }
  executor_->set_observer(sync_->observer());
}

// Per parameter: the configured method; `sfb` where it applies (else
// all-reduce); `hybrid` by the cost model (cost::choose_sync on this
// machine's cpu-local link); then the parallel.sync overrides.
std::map<std::string, std::string> Trainer::sync_methods() const {
  const auto& par = config_.parallel;
  const auto& g = module_->graph();
  const auto cluster = cost::load_cluster("cpu-local");
  const std::int64_t samples = config_.train.mini_batch / par.devices;
  std::map<std::string, std::string> methods;
  std::map<std::string, cost::SyncChoice> choices;
  for (const auto& op : g.ops()) {
    for (const auto& p : op.params) {
      std::string m = par.grad_sync;
      if (m == "sfb" && !cost::sfb_shape(op, p)) m = "allreduce";
      if (m == "hybrid") {
        choices[p.name] = cost::choose_sync(op, p, samples, static_cast<int>(par.devices), cluster.intra_node,
                                            cluster.device);
        m = cost::to_string(choices[p.name].method);
      }
      methods[p.name] = m;
    }
  }
  for (const auto& [name, m] : par.sync) {
    auto it = methods.find(name);
    if (it == methods.end())
      throw ConfigError("parallel.sync names '" + name + "', which is not a parameter of " + g.name() +
                        " (see `trident graph --model " + g.name() + " --ops`)");
    const graph::Op* owner = nullptr;
    for (const auto& op : g.ops())
      for (const auto& p : op.params)
        if (p.name == name && m == "sfb" && !cost::sfb_shape(op, p)) owner = &op;
    if (owner) throw ConfigError("parallel.sync." + name + " = 'sfb': SFB applies only to Linear weights");
    it->second = m;
  }
  if (leader() && par.grad_sync == "hybrid") {
    std::ostringstream s;
    s << "gradient sync (hybrid, cost model: cpu-local link, " << samples << " samples per rank):\n"
      << std::left << std::setw(36) << "  parameter" << std::setw(14) << "shape" << std::setw(11) << "method"
      << std::right << std::setw(14) << "bytes/iter" << std::setw(14) << "predicted ms" << "\n";
    for (const auto& [name, t] : params_) {
      const auto& c = choices.at(name);
      s << "  " << std::left << std::setw(34) << name << std::setw(14) << shape_of(t) << std::setw(11)
        << methods.at(name) << std::right << std::setw(14) << static_cast<std::int64_t>(c.bytes) << std::setw(14)
        << std::fixed << std::setprecision(3) << c.seconds * 1e3 << (par.sync.count(name) ? "  (override)" : "")
        << "\n";
    }
    out_ << s.str();
  }
  return methods;
}

std::vector<double> Trainer::sum_over_ranks(std::vector<double> values) const {
  if (!group_) return values;
  auto t = torch::tensor(values, torch::kFloat64);
  std::vector<at::Tensor> v{t};
  try {
    group_->pg().allreduce(v)->wait(group_->timeout());
  } catch (const std::exception& e) {
    const auto lost = group_->diagnose();
    throw comm::CommError("rank " + std::to_string(world_.rank) + ": step " + std::to_string(step_) +
                          ": all-reduce of the loss failed" + (lost.empty() ? "" : " (" + lost + ")") + ": " +
                          comm::one_line(e));
  }
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

// Under a parameter server each rank holds the optimizer state of the
// parameters it owns; a checkpoint needs all of it. Every rank serialises its
// state; the buffers are all-gathered (padded to one size) and merged by name.
std::map<std::string, ParamState> Trainer::gathered_optimizer_state() const {
  auto state = optimizer_->state();
  if (!group_) return state;
  torch::serialize::OutputArchive archive;
  std::string keys;
  for (const auto& [name, slots] : state)
    for (const auto& [slot, t] : slots) {
      archive.write("optim/" + name + "/" + slot, t);
      keys += name + "/" + slot + "\n";
    }
  archive.write("keys", c10::IValue(keys));
  std::ostringstream bytes;
  archive.save_to(bytes);
  const auto all = gather_strings(bytes.str());
  for (const auto& theirs : all) {
    std::istringstream stream(theirs);
    torch::serialize::InputArchive in_archive;
    in_archive.load_from(stream);
    c10::IValue listed;
    in_archive.read("keys", listed);
    std::istringstream lines(listed.toStringRef());
    for (std::string key; std::getline(lines, key);) {
      const auto cut = key.rfind('/');
      torch::Tensor t;
      in_archive.read("optim/" + key, t);
      state[key.substr(0, cut)][key.substr(cut + 1)] = t;
    }
  }
  return state;
}

}  // namespace trident::runtime
