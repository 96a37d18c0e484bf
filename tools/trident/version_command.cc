
#include "commands.h"

#include <iostream>

#include <torch/cuda.h>
#include <torch/version.h>

#include "trident/comm/group.h"
#include "trident/executor/tensor_placement.h"
#include "trident/process/blas.h"
#include "trident/process/process.h"

namespace trident::cli {
namespace {

// `trident version`: which LibTorch, which build, which backends, which GPUs.
int show_version() {
  std::cout << "trident " << TRIDENT_VERSION << ", LibTorch " << TORCH_VERSION << ", "
            << (executor::Placement::cuda_build() ? "CUDA" : "CPU") << " build; collectives: " << comm::backend_names();
  if (executor::Placement::cuda_build()) std::cout << "; CUDA devices visible: " << static_cast<int>(torch::cuda::device_count());
  std::cout << "\nBLAS: " << process::blas_in_use().describe() << "\n";
  std::cout << "ATen CPU kernels: " << process::aten_kernels() << "\n";
  std::cout << "bf16 on this CPU: "
            << (process::cpu_has_bf16() ? "native (AVX512-BF16 or AMX-BF16)"
                                        : "emulated (no AVX512-BF16 or AMX-BF16): train.precision=bf16 runs slower than fp32")
            << "; oneDNN ISA " << process::onednn_isa() << "\n";
  return 0;
}

}  // namespace

Command add_version_command(CLI::App& app) {
  auto* c = app.add_subcommand("version", "print trident's version, its LibTorch, build (CPU or CUDA) and backends");
  return {c, [] { return show_version(); }};
}

}  // namespace trident::cli
