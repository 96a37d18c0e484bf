// WorldInfo: which process this is among how many, read from the launcher's
// environment — `torchrun` / `trident launch` (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), `mpirun` (OMPI_COMM_WORLD_*), `srun`
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID). When several launchers' variables are
// present they must agree. With none, the process is alone (rank 0 of 1).
//
// local_size, the job's processes on this host, comes from LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE or SLURM_NTASKS_PER_NODE / SLURM_TASKS_PER_NODE
// (e.g. "2(x3),1", indexed by SLURM_NODEID); a launcher that gives none is
// taken to have started every process here (local_size = world_size), the
// safe guess when cores are divided among them.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include "trident/base/error.h"

namespace trident::comm {

// A bad environment, a failed rendezvous, a lost peer or a timed-out
// collective; the message names the rank, the variable or the operation.
class CommError : public Error {
 public:
  explicit CommError(std::string message, ErrorKind kind = ErrorKind::kFailure, ErrorContext context = {})
      : Error(kind, std::move(message), std::move(context)) {}
};

struct WorldInfo {
  int rank = 0, world_size = 1, local_rank = 0;
  int local_size = 1;  // processes of this job on this host
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // torchrun | mpirun | srun | none
  // The job this process belongs to: TRIDENT_JOB_ID (trident launch sets a
  // fresh one per job), else SLURM_JOB_ID; empty when neither is set. A
  // worker whose job differs from rank 0's is refused at the rendezvous
  // (Note [Job ids]).
  std::string job_id;
  // How many times the launcher has started this job's workers again
  // (TRIDENT_RESTART_COUNT, see `trident launch --max-restarts`); 0 at first.
  int restart_count = 0;
  // The fewest devices the job may continue on after a slot fails to start
  // (TRIDENT_MIN_DEVICES, set by `trident launch --min-devices M`); 0 when
  // the launcher is not elastic.
  int min_devices = 0;
};

// Throws CommError naming the variable: not an integer, out of range,
// launchers that disagree, or MASTER_ADDR / MASTER_PORT missing when
// world_size > 1.
WorldInfo world_from_env(const std::map<std::string, std::string>& env);
WorldInfo world_from_env();  // the process environment

// Tells the launcher that this worker has started and reached the
// rendezvous store (Note [Slots that fail to start] in tools/trident/launch.cc):
// writes one byte to the pipe whose descriptor TRIDENT_READY_FD names and
// closes it, once per process. Without that variable it does nothing.
void report_started();

// A TCP port on 127.0.0.1 that is free now (the kernel picks it); throws
// CommError when there is none.
int free_local_port();

}  // namespace trident::comm
