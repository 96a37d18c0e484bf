// Group: a process group (Gloo in the CPU build; in the CUDA build NCCL for
// CUDA tensors and the store for CPU ones, see Note [Backends] in
// comm/group.h) over all ranks of the world or over a
// subset, e.g. the replicas of one pipeline stage. A value type: copies share
// the same underlying c10d group. Every rank of the parent must create the
// same subgroups in the same order (c10d's rule).
//
// Note [Backends]
// ~~~~~~~~~~~~~~~
// Which c10d backend carries which tensors.
//
//   Gloo carries CPU tensors in every build. The LibTorch wheel has Gloo
//   linked into libtorch_cpu but ships no Gloo headers, and ProcessGroupGloo.hpp includes them; headers from another
//   Gloo revision (Debian's, the only ones at hand) describe other class
//   layouts. That is safe here, and only here, because this file uses
//   nothing whose layout Gloo defines: every Gloo-typed member of
//   ProcessGroupGloo and its Options is a pointer, the constructor and the
//   device factories are compiled in the wheel, and the process group is
//   used only through c10d::Backend's virtual functions (whose vtable the
//   wheel emits). No inline function that touches a Gloo object may be
//   called from trident: `nm -C` of any trident binary must define no
//   gloo:: symbol, which ctest gloo_symbols checks.
//
//   CUDA build (TRIDENT_CUDA): one c10d ProcessGroup with a backend per
//   device type, as PyTorch's "cpu:gloo,cuda:nccl" — NCCL for CUDA tensors
//   (gradient sync and stage-to-stage transfers of a GPU run), Gloo for CPU
//   tensors. NCCL is created only where a GPU is visible; it connects
//   lazily, at its first collective.
//
// No other file includes a backend's header.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "trident/comm/store_backend.h"
#include "trident/comm/world.h"

namespace trident::comm {

class Group {
 public:
  // Rendezvous over a TCPStore hosted by rank 0 at MASTER_ADDR:MASTER_PORT.
  // Throws CommError naming the address when the store cannot be reached
  // within `timeout`.
  static Group connect(const WorldInfo& world, std::chrono::milliseconds timeout);
  // A group over a store that every member shares (tests: a HashStore and
  // one thread per rank).
  static Group over_store(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                          std::chrono::milliseconds timeout);

  // The members `ranks` (indices into this group, ascending) as a new group;
  // call on every member with the same arguments. Throws CommError if this
  // rank is not among them.
  Group subgroup(const std::vector<int>& ranks, const std::string& name) const;

  int rank() const { return rank_; }  // within this group
  int size() const { return size_; }
  // The world rank of member `r` of this group (of this process without an
  // argument): messages name world ranks, which users see in logs and
  // launchers; a subgroup's own numbering means nothing to them.
  int world_rank(int r) const { return world_ranks_.at(static_cast<std::size_t>(r)); }
  int world_rank() const { return world_rank(rank_); }
  // "rank 5" for a world group; "rank 5 (member 1 of 'stage1')" for a subgroup.
  std::string member(int r) const;
  const std::string& name() const { return name_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  c10d::ProcessGroup& pg() const { return *pg_; }
  // This group with its collectives sent through `pg` instead (same members,
  // store and timeout): a decorator that counts or delays them, in tests.
  Group with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> pg) const;
  c10::intrusive_ptr<c10d::ProcessGroup> process_group() const { return pg_; }
  // Makes a process group of `size` members over a store they share.
  using Maker = std::function<c10::intrusive_ptr<c10d::ProcessGroup>(
      c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout)>;
  // This group, and every subgroup made from it, with process groups made
  // by `make` instead of the build's backends: tests run code that makes
  // its own subgroups over the store backend's matching modes.
  Group made_by(Maker make) const;

  // After a collective failed: which ranks stopped responding. Every rank of
  // a group made by connect() beats a heartbeat into the rendezvous store;
  // this samples them twice, 1.5 s apart, and names the ranks whose beat did
  // not advance — or says the store (on rank 0) is gone. Empty when nothing
  // can be said (e.g. groups over a test store).
  std::string diagnose() const;

 private:
  Group(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank, int size,
        std::chrono::milliseconds timeout, std::string host);
  c10::intrusive_ptr<c10d::Store> store_;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_{60000};
  std::vector<int> world_ranks_;  // member -> world rank
  std::string name_ = "world";
  std::shared_ptr<const Maker> maker_;  // null: the build's backends
  std::string host_;  // Gloo device: "127.0.0.1", or "" for this host's default interface
  std::shared_ptr<class Heartbeat> heartbeat_;  // shared by copies and subgroups
  c10::intrusive_ptr<c10d::Store> root_store_;   // where the heartbeats are; null without them
  // Where the store backend reads this group's members' heartbeats (Note
  // [Lost writers]); none for groups without a heartbeat.
  std::optional<Beats> beats() const;
  // Declared last, destroyed first: peers see this rank's connections close
  // while its heartbeat and (on rank 0) the store still answer diagnose().
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
};

// The c10d backends of this build, for people (`trident version`): "gloo",
// or "store (CPU tensors), nccl (CUDA tensors)" (see Note [Backends]).
std::string backend_names();

// Every member's `mine`, in rank order, on every member (any lengths).
// `what` names the exchange in the CommError thrown when a member fails.
std::vector<std::string> allgather_strings(const Group& group, const std::string& mine, const std::string& what);

}  // namespace trident::comm
