// `trident launch --nproc N [--master-port P] -- <subcommand> ...`: starts N
// local workers (this same binary) with the torchrun environment (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT), prefixes
// their output with "[rank r] ", forwards Ctrl-C, and — torchrun's semantics
// — when one worker fails stops the others (SIGTERM, then SIGKILL after a
// grace period) and exits 1 naming the failed rank and its last message.
// With max_restarts N (torchrun's --max-restarts), a failure instead starts
// all workers again, up to N times, each time printing why and which restart
// it is; workers see TRIDENT_RESTART_COUNT (0 on the first start), and
// `trident train` resumes from its newest complete checkpoint when it is > 0.
// A worker's bad input (exit 2) and Ctrl-C are not retried. After N restarts
// the launcher exits 1 naming every failure.
// With min_devices M (elastic, needs max_restarts >= 1), a worker that fails
// before it joins the rendezvous marks its slot as gone: the job starts
// again on the slots left, as long as at least M are (see Note [Slots that fail
// to start] in launch.cc); workers see TRIDENT_MIN_DEVICES and a smaller
// WORLD_SIZE, and `trident train` re-plans for it.
// Workers get TRIDENT_JOB_ID (the caller's, or a fresh one per launch, kept
// across restarts); a worker of another job that reaches this job's
// rendezvous is refused (see Note [Job ids] in comm/world.h).
// Multi-machine runs use mpirun or srun directly (see README).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace trident::cli {

struct LaunchOptions {
  int nproc = 1;
  int master_port = 0;          // 0: pick a free port
  std::vector<std::string> args;  // the subcommand and its flags
  double grace_s = 10;          // after a failure, how long the others get to exit
  int max_restarts = 0;         // start all workers again after a failure, at most this often
  int min_devices = 0;          // elastic: drop slots that fail to start while this many are left (0: off)
  std::string master_addr = "127.0.0.1";  // MASTER_ADDR: where rank 0 (slot command or not) serves the rendezvous
  // Runs each worker through this shell command, "{slot}" replaced by its
  // slot: sh -c 'COMMAND "$0" "$@"' TRIDENT ARGS... — e.g. `numactl
  // --cpunodebind={slot}`, or `ip netns exec host{slot}` (the tests' hosts).
  // The command must pass the environment on. Empty: the worker is started
  // directly.
  std::string slot_command;
  // Elastic: how many of `left` slots to start (at least min_devices, or 0
  // to give up); unset, all of them. `trident train` asks its planner.
  std::function<int(int left)> devices_for;
};

// Returns the exit code for `trident launch`: 0 when every worker of the
// last start exited 0, 130 after Ctrl-C, the first failed worker's 2 (bad
// input) or else 1.
// Throws InputError for bad options.
int launch(const LaunchOptions& options);

}  // namespace trident::cli
