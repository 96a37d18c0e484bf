// GradSync: sums the gradients of a set of parameters over a process group,
// so that every member ends with the same gradient — the one single-process
// training on the whole global batch would compute (the loss is a sum over
// rows divided by the global batch; see Note [Loss scale] in nn/graph_executor.h).
//
// One interface for every strategy (docs/architecture.md, `comm`), on any group and any
// subset of a model's parameters, so pipeline stages reuse it for their
// replicas. Use per iteration:
//   sync.arm();        // before the backward that completes the gradients
//   loss.backward();   // hooks start communication as gradients become ready (WFBP)
//   sync.finish();     // waits for all of it; gradients are now summed
//
// Note [Deterministic communication order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every rank launches its
// collectives in the same order (bucket index order), never in the order its
// gradients happen to become ready, which could differ between ranks and hang.
//
// Note [PS pieces]
// ~~~~~~~~~~~~~~~~
// A bucket moves in pieces of at most a bucket's bytes: piece k carries
// the k-th `chunk` elements of every server's block, so a push or pull of
// piece k is one alltoall of P rows of `chunk` elements, and which member
// serves which elements (shard()) does not depend on the cut. A bucket of
// small tensors is one piece; a tensor larger than a bucket is several.
// The pieces' buffers come from one pool and the bytes held by pieces in
// flight stay within PsOptions::buffer_bytes (one piece always may go), so
// the PS's transient memory is bounded whatever the model's size: what it
// saves against all-reduce is the optimizer state it shards (and
// all-reduce's own bucket buffers). A server sums its block piece by piece
// and updates it once every piece has arrived (one optimizer step per
// tensor and iteration, as before); the pull's pieces are cut from the
// updated block as they are launched.
// Waiting for room must not deadlock members that launch and wait in
// different orders. Every piece has a place in one order — (iteration,
// bucket, push before pull, piece) — and every member launches pushes and
// pulls each in that order (backward's bucket order; serving in order). A
// member blocks only on the first piece in that order it has in flight,
// and only after launching any pull piece before it that it may launch and
// serving every bucket it may serve: then the smallest piece any member
// waits for has been launched by every member, and completes.
// Under staleness s > 0 a pull that arrives while its parameters are held
// for backward (or were read in this forward) cannot land yet; its pieces
// wait outside the bound (parked), as much as s iterations of pulls.
//
// Note [Server copy]
// ~~~~~~~~~~~~~~~~~~
// Under staleness s > 0 a server keeps its block in a
// tensor of its own — the optimizer updates that, and the worker's
// parameters change only when the pull lands (its own block too). So a
// server updates a block at the first call-in after its last push
// arrived (an op's gate, a bucket's launch in backward, apply()), even
// while this worker's forward holds the parameters for backward; without
// the copy it had to wait for apply(). Measured (docs/benchmarks.md,
// "Bounded staleness and accuracy"): read staleness 1.46-1.49 → 1.33 at
// s = 2. A server thread serving each push the moment it arrives was
// tried on top and measured no fresher on 2 cores; not kept. Under BSP the
// server updates the parameters in place (no copy): every pull lands
// before the next forward reads it anyway. The copy costs 1/P of the
// bucket's elements per member; update() takes it from the parameters at
// the first update after construction or flush().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "trident/cost/buckets.h"
#include "trident/graph/op_graph.h"

#include "trident/comm/group.h"

namespace trident::sync {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// Bucket size when none is given (config parallel.bucket_mb). See Note [Gradient buckets].
using cost::kDefaultBucketBytes;

// One communication span, for traces and the exposed-communication figure.
struct SyncEvent {
  std::string name;  // "allreduce bucket 3"
  double start_s = 0, end_s = 0;  // seconds on the steady clock since the iteration's arm()
};

struct SyncStats {
  // Per parameter, bytes this rank sent / received in the last iteration,
  // by the algorithm's formula (cost/network.h).
  std::map<std::string, double> sent, received;
  std::vector<SyncEvent> events;
  double backward_end_s = 0;   // finish() was called (backward done)
  double exposed_s = 0;        // from the end of backward to the end of the last sync
  // PS: of the parameter reads in the last iteration, the mean number of
  // iterations' updates each missed against BSP (0 under BSP; at most s).
  double read_staleness = 0;
  // PS: bytes of the buffers its pieces have taken (the pool's size, which
  // never shrinks: the most held at once; see Note [PS buffers]).
  std::int64_t buffer_bytes = 0;
};

class GradSync {
 public:
  virtual ~GradSync() = default;
  virtual void arm() = 0;
  virtual void finish() = 0;
  // The optimizer step: calls `update` for what this rank updates and leaves
  // every rank's parameters equal (under staleness, eventually: flush()).
  // All strategies but PS update every parameter locally; under PS each rank
  // is the server of a block of every tensor and updates only that block
  // (so optimizer state lives only there, see Note [Sharded parameter server]),
  // passing `update` a flat view of those elements. `update` may be called
  // after apply() returns (a server applies an older iteration's update when
  // its last push arrives): capture by value what it needs.
  using Update = std::function<void(const std::string& name, torch::Tensor& param, const torch::Tensor& grad)>;
  virtual void apply(const Update& update) = 0;
  // The update of the iteration armed next, given before its backward: a
  // PS server may then apply it as soon as a bucket's pushes arrive, while
  // backward goes on (Poseidon's overlap). Optional; apply() passes it too.
  virtual void set_update(const Update& update) { (void)update; }
  // Which elements of parameter `name` (flattened) this rank updates and
  // holds optimizer state for: nullopt when every member updates all of it;
  // otherwise [begin, end), possibly empty.
  struct Span {
    std::int64_t begin = 0, end = 0;
    std::int64_t size() const { return end - begin; }
  };
  virtual std::optional<Span> shard(const std::string& name) const {
    (void)name;
    return std::nullopt;
  }
  // An observer for the executors that run this model's ops (SFB captures
  // Linear layers' inputs and output gradients); empty when not needed.
  using OpObserver = std::function<void(graph::OpId, const std::vector<torch::Tensor>&, const torch::Tensor&)>;
  virtual OpObserver observer() { return {}; }
  // Called by the executor before it runs an op, to wait for the op's
  // parameters where they are still on their way (PS pulls, which overlap
  // the next forward); empty when not needed. Whoever takes the gate must
  // call it before every op; a sync whose gate is not taken lands
  // everything in apply().
  using OpGate = std::function<void(graph::OpId)>;
  virtual OpGate gate() { return {}; }
  // Under a pipeline delay (Note [Delayed pipelines] in schedule/delayed.h)
  // a stage runs forwards of the next iteration before this one's last
  // backward: between next_forwards(true) and next_forwards(false) what the
  // observer captures belongs to the next iteration (SFB's layer inputs).
  virtual void next_forwards(bool next) { (void)next; }
  // Note [Global gradient norm]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // Clipping by the global norm (optimizer.clip_norm) needs ‖g‖² over every
  // parameter of the model, each element once, of the gradient the update
  // will use: after sync, before any update. Each rank contributes its
  // part and one all-reduce over the world sums them: a sync whose members
  // all hold the summed gradient counts it on member 0 only; a PS server
  // counts the blocks it serves (each element has one server); tied
  // parameters are counted once by the first of their holders (TiedSync).
  // The update then takes the gradient times min(1, clip / (‖g‖ + 1e-6)),
  // torch's clip_grad_norm_. A PS server cannot update a bucket during
  // backward when clipping, as it waits for the norm: set_update is not
  // given, and apply() updates every block.
  //
  // After finish(), before apply(): this member's part of ‖g‖² (in float64)
  // of the summed gradients of the parameters this sync holds.
  virtual double grad_square_sum() = 0;
  // Waits for anything still in flight (PS pulls under staleness > 0), so
  // every rank holds the same parameters; before a checkpoint and at the end.
  virtual void flush() {}
  virtual const SyncStats& stats() const = 0;
  virtual std::string name() const = 0;
};

// ‖t‖², summed in float64 (0 for an undefined tensor).
double square_sum(const torch::Tensor& t);

// Bucketed ring all-reduce with WFBP: parameters are packed in reverse order
// into buckets of at most `bucket_bytes` (a parameter larger than that gets
// its own); a bucket's async all-reduce starts once all its gradients are
// accumulated (AccumulateGrad post-hooks) and every earlier bucket has
// started. `wfbp = false` starts everything in finish() instead (the
// baseline WFBP is measured against).
std::unique_ptr<GradSync> make_allreduce_sync(comm::Group group, NamedParams params,
                                              std::int64_t bucket_bytes = kDefaultBucketBytes, bool wfbp = true);

// Note [Sharded parameter server]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Poseidon's PS as a block-sharded KV store with one server per replica,
// colocated with its worker. Parameters are packed, in reverse order, into
// buckets of at most `bucket_bytes` (a larger tensor gets its own); each
// bucket is cut into P equal blocks (the last short), block j served by
// member j, so every server holds 1/P of every bucket and of every large
// tensor. Per bucket and iteration:
//   push    as soon as backward has produced the bucket's gradients (WFBP),
//           an alltoall sends block j of this worker's gradients to server j;
//   update  server j sums its block's P pushes in member order and applies
//           the optimizer to its block — optimizer state lives only there;
//   pull    an alltoall on a second group of the same members, each server
//           sending its new block to every worker (Gloo 1.13's allgather
//           took three times as long for the same bytes).
// Each direction moves 2·S·(P−1)/P bytes per replica for S bytes of
// parameters, as a ring all-reduce does. A pull lands when the op that reads
// the bucket is about to run (gate()), so pulls overlap the next forward.
//
// Note [Staleness]
// ~~~~~~~~~~~~~~~~
// Bounded staleness as stale-synchronous parallel (SSP).
// A worker's clock counts its finished iterations. A worker at clock c may
// run iteration c once every update of iterations up to c − s − 1 has
// reached it (so no member is more than s clocks behind); it reads whatever
// newer blocks have arrived. s = 0 is BSP: every pull of an iteration lands
// before the next forward reads it, and the weights equal one process's.
// Under s > 0 a slow member no longer stalls the others (they wait only at
// the bound); what a read sees depends on timing, so runs are not bitwise
// reproducible. flush() waits for everything, so every member holds the
// same weights (before checkpoints and evaluation, and at the end).
// Under s > 0 each server updates a copy of its block (see Note [Server copy]
// in sync/grad_sync.h), so it can serve a push the moment it arrives, and
// SyncStats::read_staleness says how many updates the reads missed.
//
// Note [Push dtype]
// ~~~~~~~~~~~~~~~~~
// Gradient pushes may move in bf16 (parallel.comm_dtype): each worker rounds
// its gradients to bf16 once, the push carries half the bytes, and the server
// sums the P pieces in fp32, in member order. Pulls stay fp32: they carry the
// server's master weights, and a bf16 pull would leave every worker holding
// bf16-rounded copies of the blocks it does not serve (norm weights and
// biases computed in fp32 would then differ between replicas). Gloo in
// LibTorch 1.13 refuses bf16 in every collective, so a bf16 buffer travels as
// a kHalf view of the same bytes (exact: nothing reads it as half).
struct PsOptions {
  int staleness = 0;
  std::int64_t bucket_bytes = kDefaultBucketBytes;
  const graph::OpGraph* graph = nullptr;  // for gate(): which ops read which parameters; must outlive the sync
  torch::ScalarType push_dtype = torch::kFloat;  // kFloat or kBFloat16 (see Note [Push dtype])
  // Bytes the pieces in flight may hold (one piece always may go): see
  // Note [PS pieces] in sync/grad_sync.h.
  std::int64_t buffer_bytes = 4 * kDefaultBucketBytes;
};
std::unique_ptr<GradSync> make_ps_sync(comm::Group group, NamedParams params, PsOptions options = {});

// Sufficient-factor broadcasting for Linear weights (every parameter given
// must be one, in `graph`): the layer's inputs a_k and output gradients
// δ_k of every row are captured (attach observer() to the executor),
// all-gathered when the last backward produces them, and ∇W = Σ_k δ_k a_kᵀ
// is rebuilt with one GEMM on every rank. Throws CommError naming a
// parameter that is not a Linear weight.
// Under bf16 (Note [Precision policy]) the layer's product ran in bf16: the
// factors are taken in the dtype of its output, move in bf16 (half the
// bytes; a kHalf view of the same bits for Gloo, as Note [Push dtype]) and
// the GEMM runs in bf16 as the layer's own backward does, so ∇W equals one
// process's on the whole batch. `shares` (by member; empty: equal): the rows
// each member runs when they differ (Note [Replica shares] in
// plan/plan.h); the factors are padded to the largest with zero rows.
std::unique_ptr<GradSync> make_sfb_sync(comm::Group group, NamedParams params, const graph::OpGraph& graph,
                                        std::vector<std::int64_t> shares = {});

// Each parameter by its own method ("allreduce", "ps" or "sfb"; missing =
// allreduce), each method on its own subgroup of the same ranks so their
// collectives never interleave. Every member calls it with the same methods
// (and `shares`, for SFB: make_sfb_sync).
std::unique_ptr<GradSync> make_hybrid_sync(comm::Group group, NamedParams params, const graph::OpGraph& graph,
                                           const std::map<std::string, std::string>& methods,
                                           std::int64_t bucket_bytes = kDefaultBucketBytes, int staleness = 0,
                                           torch::ScalarType ps_push_dtype = torch::kFloat,
                                           std::vector<std::int64_t> shares = {});

}  // namespace trident::sync
