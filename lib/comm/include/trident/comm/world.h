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
//
// Note [Arrivals]
// ~~~~~~~~~~~~~~~
// Before Gloo connects, every rank counts itself in at the
// store and waits until all have — for the connect timeout, half of it
// again and 2 s more. That is longer than a rank's own attempt to reach the
// store (the connect timeout), so a rank that cannot reach it (a cut link,
// a host that is down) fails first, on its own and before it reported its
// start, and an elastic launcher drops its slot (see Note [Slots that fail to
// start] in tools/trident/launch.cc); the others then fail naming the ranks
// that never came, instead of in Gloo's connect.
//
// Note [Job ids]
// ~~~~~~~~~~~~~~
// Two jobs on one host that were given the same
// MASTER_PORT would meet at one rendezvous store, and a worker of the second
// would take a rank of the first. Before any rank joins the process group,
// rank 0 publishes its job id in the store and every other rank compares its
// own: a worker of another job is refused, naming both ids, before it has
// written anything the job reads. Ranks with no id (a launcher that sets
// none) are not checked.
//
// Note [Rank 0 stays for the diagnosis]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Rank 0 hosts the store, so when it
// has diagnosed a failure it does not leave until every rank it found alive
// has written that it diagnosed too (at most kStoreLinger): a survivor that
// starts its diagnosis late, e.g. on a loaded machine, still reads the beats
// and names the rank that stopped, instead of finding the store gone.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "trident/base/error.h"

namespace trident::comm {

// A bad environment, a failed rendezvous, a lost peer or a timed-out
// collective; the message names the rank, the variable or the operation.
using CommError = ComponentError<struct CommErrorTag, ErrorKind::kFailure>;

struct WorldInfo {
  int rank = 0, world_size = 1, local_rank = 0;
  int local_size = 1;  // processes of this job on this host
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // torchrun | mpirun | srun | none
  // The job this process belongs to: TRIDENT_JOB_ID (trident launch sets a
  // fresh one per job), else SLURM_JOB_ID; empty when neither is set. A
  // worker whose job differs from rank 0's is refused at the rendezvous
  // (see Note [Job ids]).
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
// rendezvous store (see Note [Slots that fail to start] in tools/trident/launch.cc):
// writes one byte to the pipe whose descriptor TRIDENT_READY_FD names and
// closes it, once per process. Without that variable it does nothing.
void report_started();

// Note [Free ports]
// ~~~~~~~~~~~~~~~~~
// A TCP port on 127.0.0.1 that is free now, for a
// rendezvous store that rank 0 will bind a moment later. It is drawn at
// random from below the kernel's ephemeral range (ip_local_port_range),
// because every outgoing connection and every listener bound to port 0 —
// Gloo's, another test's — takes its port from that range: a port from it
// could be taken before rank 0 binds it, and the workers would then reach
// that socket instead of the store. Below the range, only another picker
// like this one can take it (and a worker of another job at this job's
// store is refused, see Note [Job ids]). Falls back to a port the kernel picks
// when none below the range is free; throws CommError when there is none.
int free_local_port();
// The kernel's ephemeral port range, [low, high] (32768..60999 when it
// cannot be read).
std::pair<int, int> ephemeral_ports();

}  // namespace trident::comm
