
#include "commands.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "trident/base/error.h"
#include "trident/base/text.h"
#include "trident/checkpoint/checkpoint_diff.h"
#include "trident/checkpoint/sharded_checkpoint.h"

namespace trident::cli {
namespace {

// A run directory's newest checkpoint, or a checkpoint directory itself.
checkpoint::CheckpointReader checkpoint_at(const std::string& path) {
  if (!std::filesystem::exists(path)) throw InputError("diff: " + path + " does not exist");
  if (std::filesystem::exists(std::filesystem::path(path) / "manifest.json") ||
      std::filesystem::is_regular_file(path))
    return checkpoint::CheckpointReader::open(path);
  return checkpoint::CheckpointReader::latest(path);
}

// `trident diff A B`: 0 when the weights agree within the tolerances, 1 when
// they differ (as diff(1)); bad input is 2.
struct DiffArgs {
  std::string a, b;
  double rtol = 1e-5, atol = 1e-6;
  bool optimizer = false;
};

int diff_runs(const DiffArgs& args) {
  const auto& [a, b, rtol, atol, with_optimizer] = args;
  const auto ca = checkpoint_at(a), cb = checkpoint_at(b);
  const auto d = checkpoint::diff_checkpoints(ca, cb, with_optimizer ? "" : "param/", rtol, atol);
  const auto list = [](const std::vector<std::string>& keys) {
    return join(std::vector<std::string>(keys.begin(), keys.begin() + std::min<std::size_t>(keys.size(), 5))) +
           (keys.size() > 5 ? ", ..." : "");
  };
  std::cout << "compared " << d.compared << " tensors of step " << ca.step() << " and step " << cb.step()
            << "; largest |a - b| = " << d.max_abs << (d.max_abs_key.empty() ? "" : " (" + d.max_abs_key + ")")
            << "\n";
  if (!d.only_a.empty()) std::cout << "only in " << a << ": " << list(d.only_a) << "\n";
  if (!d.only_b.empty()) std::cout << "only in " << b << ": " << list(d.only_b) << "\n";
  if (!d.shape_differs.empty()) std::cout << "shape or dtype differs: " << list(d.shape_differs) << "\n";
  if (!d.value_differs.empty())
    std::cout << d.value_differs.size() << " differ beyond rtol " << rtol << ", atol " << atol << ": "
              << list(d.value_differs) << "\n";
  std::cout << (d.equal() ? "equal" : "different") << "\n";
  return d.equal() ? 0 : 1;
}

}  // namespace

Command add_diff_command(CLI::App& app) {
  auto d = std::make_shared<DiffArgs>();
  auto* c = app.add_subcommand("diff", "compare two runs' newest checkpoints tensor by tensor (exit 0 equal, 1 different)");
  c->add_option("a", d->a, "a run directory or a checkpoint directory")->required();
  c->add_option("b", d->b, "the other")->required();
  c->add_option("--rtol", d->rtol, "relative tolerance (torch.allclose)");
  c->add_option("--atol", d->atol, "absolute tolerance (torch.allclose)");
  c->add_flag("--optimizer", d->optimizer, "compare the optimizer state and node embeddings too");
  return {c, [d] { return diff_runs(*d); }};
}

}  // namespace trident::cli
