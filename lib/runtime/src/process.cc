#include "trident/runtime/process.h"

#include <dlfcn.h>
#include <malloc.h>

#include <torch/torch.h>

namespace trident::runtime {

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

}  // namespace trident::runtime
