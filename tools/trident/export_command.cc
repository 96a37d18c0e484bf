// `trident export RUN_DIR [--out FILE]`: the newest checkpoint's weights for plain PyTorch.
#include "commands.h"

#include <filesystem>
#include <iostream>

#include "trident/checkpoint/sharded_checkpoint.h"
#include "trident/config/config.h"

namespace trident::cli {
namespace {

struct ExportArgs {
  std::string run_dir, out;
};

// `trident export RUN_DIR [--out FILE]`: the newest checkpoint's weights for plain PyTorch.
int export_run(const std::string& run_dir, std::string out) {
  if (!std::filesystem::is_directory(run_dir)) throw config::ConfigError("export: " + run_dir + " is not a run directory");
  checkpoint::CheckpointReader ck;
  try {
    ck = checkpoint::CheckpointReader::latest(run_dir);
  } catch (const checkpoint::CheckpointError& e) {
    throw config::ConfigError(std::string("export: ") + e.what());
  }
  if (out.empty()) out = (std::filesystem::path(run_dir) / "weights.pt").string();
  const auto n = checkpoint::export_weights(ck, out);
  std::cout << "exported " << n << " parameters of step " << ck.step() << " (" << ck.path() << ") to " << out
            << "; in Python: model.load_state_dict(torch.load('" << out << "'))\n";
  return 0;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* c = app.add_subcommand("export", "write a run's newest checkpoint as a PyTorch state_dict file (torch.load)");
  c->add_option("run_dir", a->run_dir, "the run directory, e.g. runs/fmnist-inception")->required();
  c->add_option("--out", a->out, "output file (default RUN_DIR/weights.pt)");
  return {c, [a] { return export_run(a->run_dir, a->out); }};
}

}  // namespace trident::cli
