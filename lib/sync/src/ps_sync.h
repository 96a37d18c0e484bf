// Internal: Poseidon's parameter server as one GradSync — a block-sharded KV
// store with colocated servers and stale-synchronous pulls (Note [Sharded
// parameter server] and Note [Staleness] in grad_sync.h), moving bounded
// pieces (Note [PS pieces] in sync/grad_sync.h). Its definitions are split by
// concept:
//   ps_sync.cc   the GradSync interface (arm, gate, apply, flush), the
//                layout of blocks and pieces, read staleness;
//   ps_serve.cc  a bucket's round trip: push, sum, the server's update,
//                pull (Note [Server copy]);
//   ps_land.cc   pieces in flight: waiting in order, landing pulls in the
//                parameters where the current call may, the byte budget.
#pragma once

#include <deque>
#include <limits>
#include <map>
#include <optional>

#include "ordered_sync.h"
#include "ps_pieces.h"

namespace trident::sync::detail {

// One piece on its way: what this member sends ([P × length]) and receives.
struct Piece {
  c10::intrusive_ptr<c10d::Work> work;
  torch::Tensor out, in;  // pool buffers (see Note [PS buffers])
};

// One bucket of one iteration on its way: push, server update, pull.
struct Flight {
  using TimePoint = std::chrono::steady_clock::time_point;
  enum class State { kPushing, kPulling, kLanded } state = State::kPushing;
  std::vector<Piece> pieces;          // the push's; once served, the pull's
  int pushed = 0, summed = 0;         // push pieces launched; waited for and added to `sum`
  int pulled = 0, waited = 0, landed = 0;  // pull pieces launched; waited for; written to the parameters
  torch::Tensor sum;  // this server's block of the summed gradients (fp32), piece by piece
  TimePoint push_start, pull_start;
};

struct Round {
  std::int64_t clock = 0;
  std::vector<Flight> flights;  // by bucket
  GradSync::Update update;      // set by set_update() before backward, or by apply()
};

// What progress may touch: iterations up to `bound` must be done (waited
// for); later ones are taken if they have arrived and `take_arrived`; only
// buckets up to `last_bucket`; the current iteration (armed, not yet
// applied) only with `current` — during its backward. In a forward
// (`forward`), pulls land only in buckets no op has read since apply().
struct Scope {
  std::int64_t bound = -1;
  bool take_arrived = false;
  std::size_t last_bucket = std::numeric_limits<std::size_t>::max();
  bool current = false;
  bool forward = false;
};

// A piece's place in the order of Note [PS pieces].
struct Place {
  std::int64_t clock = 0;
  std::size_t bucket = 0;
  int pull = 0, piece = 0;
  bool operator<(const Place& o) const {
    return std::tie(clock, bucket, pull, piece) < std::tie(o.clock, o.bucket, o.pull, o.piece);
  }
};

constexpr auto kNoBound = std::numeric_limits<std::int64_t>::max();

class PsSync final : public OrderedSync {
 public:
  PsSync(comm::Group group, NamedParams params, std::vector<std::vector<int>> buckets, const PsOptions& options);

  void arm() override;
  void set_update(const Update& update) override { next_update_ = update; }
  void apply(const Update& update) override;
  OpGate gate() override;
  void flush() override;
  std::optional<Span> shard(const std::string& name) const override;
  std::string name() const override { return "ps"; }
  // See Note [Global gradient norm]: the blocks this server serves.
  double grad_square_sum() override;

 private:
  // --- ps_sync.cc: layout and staleness ---
  static std::vector<int> members(int n);
  int size() const { return group_.size(); }
  int me() const { return group_.rank(); }
  void lay_out(std::int64_t bucket_bytes);
  void map_ops(const graph::OpGraph& g);
  // How many iterations' updates a read of bucket b misses against BSP's
  // (which reads every update up to the last iteration).
  void count_read(std::size_t b);
  void report_staleness();

  // --- ps_serve.cc: push, sum, update, pull ---
  torch::Tensor acquire(torch::ScalarType dtype);  // See Note [PS buffers]
  // A pool buffer as a piece's P rows of `length` elements.
  torch::Tensor rows(const torch::Tensor& buffer, std::int64_t length) const {
    return buffer.narrow(0, 0, size() * length).view({size(), length});
  }
  // A parameter's elements, flat, sharing its storage.
  // The parameter's current storage, written without bumping its version
  // counter: under a pipeline delay the next mini-batch's forwards saved the
  // parameter while the update writes a new version (Note [Weight versions]).
  torch::Tensor flat(int i) const { return params_[i].second.variable_data().view(-1); }
  // Backward produced bucket b's gradients: push its pieces, piece k's row j
  // to server j, as room allows (see Note [PS pieces]).
  void launch(std::size_t b) override;
  // Nothing to wait for at the end of backward: pushes complete when their
  // server needs them (serve()).
  void complete(std::size_t) override {}
  void push(Round& round, std::size_t b, int k);
  // Waits for push piece `summed` of bucket b and adds its P rows into this
  // server's block of the sum, in member order, in fp32.
  void take_push(Round& round, std::size_t b);
  // Sums what has arrived of bucket b's pushes (with `must`, waits for all
  // of them, oldest piece first); true once every piece is summed.
  bool sum_pushes(Round& round, std::size_t b, bool must);
  // Server side, strictly in (iteration, bucket) order so every member
  // launches its pulls in the same order (Scope says what may be touched).
  void serve(const Scope& scope);
  // Waits for a push or pull of bucket b; a failure names the bucket, the
  // clock and (Group::diagnose) a lost member.
  void wait(c10d::Work& work, const char* what, const Round& round, std::size_t b);
  // The optimizer on this server's block of bucket b, once every push piece
  // is summed; its pull pieces are launched later, in order (issue_pulls()).
  void update(Round& round, std::size_t b);
  // Launches pull piece `pulled` of bucket b: every row this server's new
  // values of the piece's elements (an alltoall whose every block is this
  // server's: Gloo's all-gather took three times as long for the same
  // bytes, docs/benchmarks.md). Alone, it pulls from itself: a copy that
  // lands as the gates allow.
  void pull(Round& round, std::size_t b);
  // Launches pull pieces in order while the budget allows.
  void issue_pulls();

  // --- ps_land.cc: pieces in flight and landing ---
  // Waits for pull piece `waited` of bucket b; its input buffer goes back,
  // what arrived waits to land (parked).
  void take_pull(Round& round, std::size_t b);
  // Writes the arrived pull pieces of bucket b into the parameters: every
  // member's block but this server's own when it updated it in place.
  void land(Round& round, std::size_t b);
  // Where the current call may write parameters (touch_, set by each entry).
  bool touchable(const Round& round, std::size_t b) const;
  // Lands bucket b's arrived pieces, iteration by iteration (a newer block
  // never gives way to an older one), where the current call may.
  void land_arrived(std::size_t b);
  struct At {
    Round* round = nullptr;
    std::size_t bucket = 0;
    Place place;
  };
  // The first piece in flight in the order of Note [PS pieces], if any.
  std::optional<At> oldest_active();
  // The first pull piece of a served bucket not launched yet, if any.
  std::optional<At> oldest_pending();
  // Blocks on the first piece in flight — after launching a pull piece
  // before it, over the budget if need be (see Note [PS pieces]) — and
  // takes it: a push summed; a pull landed where the current call may.
  // False when nothing is in flight or waiting to launch.
  bool retire_oldest();
  // Room for `need` more bytes in flight: takes the oldest pieces, serving
  // what that completes, until they fit (one piece always may go).
  void ensure_room(std::int64_t need);
  // Worker side: lands pulls into the parameters, per bucket in iteration
  // order (a newer block never gives way to an older one), as `scope`
  // allows; `only`: these buckets (an op's), else all.
  void receive(const Scope& scope, const std::vector<int>* only);
  // Lands bucket b's pull of `round`: what has arrived, or (`must`) all of
  // it, taking older pieces first; true once it has landed.
  bool pull_through(Round& round, std::size_t b, bool must);
  static bool landed(const Round& round);

  std::int64_t staleness_ = 0;
  bool copy_ = false;  // See Note [Server copy]
  torch::ScalarType push_dtype_;  // See Note [Push dtype]
  std::int64_t budget_;           // bytes pieces in flight may hold (see Note [PS pieces])
  comm::Group pull_group_;
  std::vector<Layout> layouts_;               // by bucket
  torch::TensorOptions options_ = torch::TensorOptions().dtype(torch::kFloat);  // the parameters'
  BufferPool pool_;                           // See Note [PS buffers]
  Scope serving_, touch_;                     // what the current call may serve, and where it may land pulls
  std::vector<Span> span_;                    // by parameter: the elements this member serves
  std::map<std::string, int> index_;          // parameter name -> index
  std::map<graph::OpId, std::vector<int>> by_op_;  // op -> buckets of the parameters it reads
  std::deque<Round> rounds_;                  // iterations not yet landed everywhere here
  std::int64_t clock_ = 0;                    // iterations applied
  bool gated_ = false;
  Update next_update_;                        // set_update(): for the next arm()
  std::vector<char> read_;                    // by bucket: read by an op since the last apply()
  std::vector<torch::Tensor> server_;         // by bucket: this server's block (see Note [Server copy])
  std::vector<char> server_fresh_;            // by bucket: server_ holds the block's current values
  std::vector<std::int64_t> newest_;          // by bucket: the newest iteration landed here (-1: none)
  double stale_sum_ = 0;                      // read staleness since the last apply()
  std::int64_t stale_reads_ = 0;
  std::size_t reported_ = 0;                  // events the caller has seen
};

}  // namespace trident::sync::detail
