// This process's cores, and how a host's cores are divided among processes
// (see Note [Thread defaults] in process/process.h). Torch-free: the planner's
// cluster model and the trainer use the same rule.
#pragma once

namespace trident {

// The cores this process may run on: its CPU affinity mask (taskset, cgroup
// cpusets, a batch system's binding), at least 1.
int usable_cores();

// `cores` shared by `processes`: cores / processes, at least 1.
int cores_per_process(int cores, int processes);

}  // namespace trident
