#include "trident/runtime/blas.h"

#include <filesystem>
#include <fstream>

#include <torch/torch.h>

namespace trident::runtime {

std::string active_blas() {
  // A matmul makes sure the BLAS library is mapped.
  (void)torch::mm(torch::ones({2, 2}), torch::ones({2, 2}));
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const auto file = std::filesystem::path(path).filename().string();
    if (file.rfind("libblas.so", 0) == 0 || file.rfind("libopenblas", 0) == 0) {
      std::error_code ec;
      auto real = std::filesystem::canonical(path, ec);
      return ec ? path : real.string();
    }
  }
  return "";
}

std::string blas_warning() {
  const auto blas = active_blas();
  if (blas.find("openblas") != std::string::npos || blas.find("mkl") != std::string::npos) return "";
  return "warning: LibTorch is using " + (blas.empty() ? std::string("no shared BLAS") : blas) +
         ", not OpenBLAS: training runs ~30x slower; install libopenblas0-pthread (make deps)";
}

}  // namespace trident::runtime
