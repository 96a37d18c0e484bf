#include "trident/base/cores.h"

#include <sched.h>

#include <algorithm>

namespace trident {

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int cores_per_process(int cores, int processes) { return std::max(1, cores / std::max(1, processes)); }

}  // namespace trident
