#include "trident/comm/group.h"

#include <algorithm>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace trident::comm {
namespace {

c10::intrusive_ptr<c10d::ProcessGroup> gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            std::chrono::milliseconds timeout, const std::string& host) {
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->timeout = timeout;
  opts->devices = {host.empty() ? c10d::ProcessGroupGloo::createDefaultDevice()
                                : c10d::ProcessGroupGloo::createDeviceForHostname(host)};
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

bool is_local(const std::string& addr) { return addr == "127.0.0.1" || addr == "localhost"; }

}  // namespace

Group Group::connect(const WorldInfo& world, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(world.master_port);
  opts.isServer = world.rank == 0;
  opts.numWorkers = world.world_size;
  opts.waitWorkers = false;
  opts.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(world.master_addr, opts);
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(world.rank) + ": cannot reach the rendezvous store at " +
                    world.master_addr + ":" + std::to_string(world.master_port) + " within " +
                    std::to_string(timeout.count()) + " ms (" + e.what() + ")");
  }
  try {
    const std::string host = is_local(world.master_addr) ? "127.0.0.1" : "";
    auto pg = gloo(store, world.rank, world.world_size, timeout, host);
    return Group(store, pg, world.rank, world.world_size, timeout, host);
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(world.rank) + ": connecting to the other " +
                    std::to_string(world.world_size - 1) + " ranks failed: " + e.what());
  }
}

Group Group::over_store(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout) {
  auto pg = gloo(store, rank, size, timeout, "127.0.0.1");
  return Group(std::move(store), pg, rank, size, timeout, "127.0.0.1");
}

Group Group::subgroup(const std::vector<int>& ranks, const std::string& name) const {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end())
    throw CommError("rank " + std::to_string(rank_) + " is not in group '" + name + "'");
  auto store = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
  const int r = static_cast<int>(it - ranks.begin()), n = static_cast<int>(ranks.size());
  return Group(store, gloo(store, r, n, timeout_, host_), r, n, timeout_, host_);
}

}  // namespace trident::comm
