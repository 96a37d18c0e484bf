// `trident launch --nproc N -- SUBCOMMAND ...`: N local workers of a subcommand (the launcher: launch.h).
#include "commands.h"

#include "launch.h"

namespace trident::cli {

Command add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* c = app.add_subcommand("launch", "start N local workers of a trident subcommand: trident launch --nproc N -- train --config f.yaml");
  c->add_option("--nproc", o->nproc, "number of worker processes")->required();
  c->add_option("--master-port", o->master_port, "rendezvous port (default: a free one on 127.0.0.1)");
  c->add_option("--master-addr", o->master_addr, "the address rank 0's rendezvous is reached at (MASTER_ADDR; default 127.0.0.1)");
  c->add_option("--slot-command", o->slot_command,
                "run each worker through this shell command, {slot} replaced by its slot, e.g. 'numactl --cpunodebind={slot}'");
  c->add_option("--grace-s", o->grace_s, "after a worker fails, seconds the others get to exit before SIGKILL");
  c->add_option("--max-restarts", o->max_restarts,
                "when a worker fails, start all again (TRIDENT_RESTART_COUNT=k), at most N times");
  c->add_option("--min-devices", o->min_devices,
                "with --max-restarts: drop slots whose worker fails to start while M are left (TRIDENT_MIN_DEVICES)");
  c->add_option("args", o->args, "the subcommand and its flags, after --");
  return {c, [o] { return launch(*o); }};
}

}  // namespace trident::cli
