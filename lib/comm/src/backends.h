// The one place in trident that knows which c10d backend carries which
// tensors, and which LibTorch is underneath (see Note [Backends], backends.cc).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "trident/comm/store_backend.h"

namespace trident::comm {

// A process group of `size` members over `store` (shared by the members
// only). `host` is the address Gloo binds: "127.0.0.1" for loopback runs,
// "" for this host's default interface (or GLOO_SOCKET_IFNAME's). `beats`,
// where the members' heartbeats are, lets the store backend notice a lost
// member before its timeout (see Note [Lost writers]); Gloo needs none.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, std::chrono::milliseconds timeout,
                                                          const std::string& host,
                                                          std::optional<Beats> beats = std::nullopt);

}  // namespace trident::comm
