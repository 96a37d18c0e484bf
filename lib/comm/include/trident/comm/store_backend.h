// StoreBackend: c10d collectives and point-to-point messages carried through
// the rendezvous store, for CPU tensors where no Gloo is at hand.
//
// See Note [Backends] (lib/comm/src/backends.cc) says which backend carries
// which tensors. The CUDA build links a LibTorch 2.x wheel that ships no
// Gloo headers, and headers from another Gloo revision are unsafe with its
// library; so there CPU tensors (the small control messages of a GPU run,
// and every message of a CPU run of that build) travel through the store,
// and CUDA tensors through NCCL. The CPU build never uses this class for
// training (Gloo is faster); its tests run it to hold it to Gloo's results.
//
// Semantics, as c10d's: members call collectives in the same order; sends
// and receives between two ranks match in order per tag; every reduction is
// a sum. Results are identical on every member: a sum adds the members'
// tensors in rank order. A collective's bytes are written when it is
// called and read when its Work is waited for, so collectives may be issued
// ahead and waited for later (wait-free backpropagation) and a receive may
// be posted before the matching send. The last reader of a message deletes
// it from the store. A wait longer than its timeout (the group's when the
// Work is waited without one) throws, naming the key it waited for.
//
// Note [Lost writers]
// ~~~~~~~~~~~~~~~~~~~
// Gloo learns that a peer died from its socket; a
// message through the store has no socket of its own, so a wait for a dead
// rank's bytes would last the whole timeout (parallel.timeout_s), after
// which a launcher has long killed the survivors and nobody has named the
// lost rank. Given the members' heartbeats (Beats: the counters Group's
// heartbeat thread writes to "heartbeat/<world rank>" every 500 ms), a wait
// goes in slices of kWaitSlice and, between slices, reads the beat of the
// rank whose bytes it waits for: a beat that stood still for kSilence ends
// the wait at once with "rank W stopped beating". A rank whose beat never
// appeared (it has not started its heartbeat yet) is waited for to the
// timeout, as without beats. Slices need a store whose timed-out wait leaves
// it usable: HashStore, and LibTorch 2.x's TCPStore (it cancels the wait at
// the server; 1.13's read the server's late answer as the reply to its next
// request).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace trident::comm {

// How receives find their sends (tests use the last two to hold
// StageExecutor to what NCCL needs, see Note [Pipeline transfers on GPUs] in
// executor/tensor_placement.h):
//   kByTag          by tag, as Gloo (the default);
//   kInOrder        in order per ordered pair of ranks, ignoring tags;
//   kStreamPerPair  in order, and each pair of ranks is one queue on each
//                   rank, as NCCL's one stream per pair: this rank's sends
//                   and receives with a peer run one at a time in the order
//                   it issued them, so a send issued after a receive from
//                   the same peer is not written until that receive has
//                   been waited for. Waiting for an operation waits for
//                   those issued before it to that peer. (Ops on a pair must
//                   be issued and waited for by one thread at a time.)
enum class Matching { kByTag, kInOrder, kStreamPerPair };

// See Note [Lost writers]: where the members' heartbeats are read.
struct Beats {
  c10::intrusive_ptr<c10d::Store> store;  // holds "heartbeat/<world rank>"
  std::vector<int> world_ranks;           // member -> world rank
};
// The key of a rank's heartbeat counter (written by Group's heartbeat).
inline std::string heartbeat_key(int world_rank) { return "heartbeat/" + std::to_string(world_rank); }
constexpr auto kWaitSlice = std::chrono::milliseconds(250);
constexpr auto kSilence = std::chrono::milliseconds(3000);

class StoreBackend final : public c10d::Backend {
 public:
  // `store` is shared by the members only (a PrefixStore per group).
  // With `beats`, a wait ends early when its writer's heartbeat stops
  // (see Note [Lost writers]).
  StoreBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout,
               Matching matching = Matching::kByTag, std::optional<Beats> beats = std::nullopt);

  const std::string getBackendName() const override { return "trident-store"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  // Equal splits only (empty split sizes): block j of `input` goes to member j.
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<std::int64_t>& output_splits,
                                               std::vector<std::int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

 private:
  // The key prefix of the next collective, "c<sequence>/".
  std::string next_collective();
  // The key of message `n` from `src` to `dst` with `tag`.
  std::string message_key(int src, int dst, int tag, std::int64_t n) const;
  // Publishes this rank's bytes of `t` under prefix + rank.
  void put(const std::string& key, const at::Tensor& t);
  // Waits for `key`, written by member `writer`, (at most `timeout`) and
  // reads it into a tensor like `like`.
  at::Tensor take(const std::string& key, int writer, const at::Tensor& like, std::chrono::milliseconds timeout);
  // Waits for `key` in slices while `writer` beats (see Note [Lost writers]).
  void wait_for(const std::string& key, int writer, std::chrono::milliseconds timeout);
  // The rank messages name: a member's world rank when beats give it.
  int who(int member) const;
  // Member `writer`'s heartbeat counter, "" before its first beat.
  std::string beat_of(int writer) const;
  // The members' tensors under `prefix` (shaped like `mine`) added in rank
  // order; member `own` (-1: none) adds `mine` instead of reading the
  // store. Appends the keys it read to `keys`.
  at::Tensor sum_in_rank_order(const std::string& prefix, const at::Tensor& mine, std::chrono::milliseconds timeout,
                               int own, std::vector<std::string>& keys);
  // Counts one reader of `prefix`; the `readers`-th deletes `keys`.
  void done_reading(const std::string& prefix, int readers, const std::vector<std::string>& keys);
  std::chrono::milliseconds limit(std::chrono::milliseconds asked) const;
  // kStreamPerPair: queues `run` behind this rank's earlier operations with
  // `peer`; the Work runs them in order up to this one.
  struct Stream;
  c10::intrusive_ptr<c10d::Work> on_stream(int peer, bool is_send, std::function<void(std::chrono::milliseconds)> run);

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  Matching matching_;
  std::optional<Beats> beats_;
  std::mutex mu_;
  std::int64_t collectives_ = 0;
  std::map<std::pair<int, int>, std::int64_t> sent_, received_;  // (peer, tag) -> messages so far
  std::map<int, std::shared_ptr<Stream>> streams_;                 // kStreamPerPair: by peer
};

// A process group whose every tensor travels through `store`: a
// ProcessGroup serving CPU tensors by a StoreBackend.
c10::intrusive_ptr<c10d::ProcessGroup> store_process_group(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                                           std::chrono::milliseconds timeout,
                                                           Matching matching = Matching::kByTag,
                                                           std::optional<Beats> beats = std::nullopt);

}  // namespace trident::comm
