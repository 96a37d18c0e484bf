#include "trident/process/process.h"

#include <fstream>

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <ATen/Version.h>
#include <torch/torch.h>

#include "trident/process/blas.h"

namespace trident::process {

ThreadChoice choose_threads(int requested, int cores, int local_processes) {
  if (requested > 0) return {requested, "train.threads"};
  const int processes = std::max(1, local_processes);
  const int threads = cores_per_process(cores, processes);
  return {threads, std::to_string(cores) + (cores == 1 ? " core / " : " cores / ") + std::to_string(processes) +
                       (processes == 1 ? " process" : " processes") + " on this host"};
}

void reexecute(char** argv) { ::execv("/proc/self/exe", argv); }

void prepare_process(char** argv) {
  if (choose_blas_kernel(argv)) reexecute(argv);
}

// See Note [CPU process settings].
void configure_process(int threads) {
  torch::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
  constexpr int kMmapThreshold = 32 << 20;  // glibc's maximum on 64-bit
  constexpr int kTrimThreshold = 256 << 20;
  ::mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  ::mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
}

std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
  return "";
}

std::string onednn_isa() {
  using GetIsa = int (*)();
  auto get = reinterpret_cast<GetIsa>(::dlsym(RTLD_DEFAULT, "dnnl_get_effective_cpu_isa"));
  if (!get) return "unknown";
  // dnnl_cpu_isa_t of oneDNN 2.x (dnnl_types.h), each a superset's bit mask.
  static const std::pair<int, const char*> kNames[] = {
      {0x1, "sse41"},        {0x3, "avx"},          {0x7, "avx2"},
      {0x27, "avx512_core"}, {0x67, "avx512_core_vnni"}, {0xe7, "avx512_core_bf16"},
      {0x3e7, "avx512_core_amx"}, {0x407, "avx2_vnni"}};
  const int isa = get();
  for (const auto& [value, name] : kNames)
    if (value == isa) return name;
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", isa);
  return std::string("isa ") + hex;
}

bool cpu_has_bf16() {
  const auto flags = cpu_flags();
  return flags.find(" avx512_bf16 ") != std::string::npos || flags.find(" amx_bf16 ") != std::string::npos;
}

// See Note [ATen CPU kernels].
std::string aten_kernels() {
  const std::string config = at::show_config();
  const std::string key = "CPU capability usage: ";
  const auto at = config.find(key);
  if (at == std::string::npos) return "unknown (LibTorch does not say)";
  const auto begin = at + key.size();
  const std::string set = config.substr(begin, config.find('\n', begin) - begin);
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  return set + (env ? std::string(" (set by ATEN_CPU_CAPABILITY=") + env + ")" : " (LibTorch's default)");
}

}  // namespace trident::process
