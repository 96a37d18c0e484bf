// Poseidon's parameter server: a block-sharded KV store with colocated
// servers and stale-synchronous pulls (see Note [Sharded parameter server] and
// See Note [Staleness] in grad_sync.h).
#include <deque>
#include <limits>

#include "ordered_sync.h"
#include "trident/cost/comm.h"

namespace trident::comm {
namespace {

// Where a bucket's parameters sit in its flat buffer, and which block this
// member serves.
struct Layout {
  std::vector<int> params;             // indices into params_
  std::vector<std::int64_t> offset;    // of each, in the bucket's flat elements
  std::int64_t elements = 0, block = 0;  // n, and ⌈n / P⌉
  std::int64_t begin(int member) const { return std::min(member * block, elements); }
  std::int64_t end(int member) const { return std::min((member + 1) * block, elements); }
};

// One bucket of one iteration on its way: push, server update, pull.
struct Flight {
  enum class State { kPushing, kPulling, kLanded } state = State::kPushing;
  c10::intrusive_ptr<c10d::Work> push, pull;
  torch::Tensor sent, received;       // [P × block]: this worker's gradients by server; this server's P pieces
  torch::Tensor pull_in, pulled;      // [P × block]: this server's block P times; every server's block
  std::chrono::steady_clock::time_point push_start, pull_start;
  torch::Tensor sum;  // this server's block of the summed gradients, once the pushes are in (summed())
};

struct Round {
  std::int64_t clock = 0;
  std::vector<Flight> flights;  // by bucket
  GradSync::Update update;      // set by set_update() before backward, or by apply()
};

// What progress may touch: iterations up to `bound` must be done (waited
// for); later ones are taken if they have arrived and `take_arrived`; only
// buckets up to `last_bucket`; the current iteration (armed, not yet
// applied) only with `current` — during its backward.
struct Scope {
  std::int64_t bound = -1;
  bool take_arrived = false;
  std::size_t last_bucket = std::numeric_limits<std::size_t>::max();
  bool current = false;
};

constexpr auto kNoBound = std::numeric_limits<std::int64_t>::max();

class PsSync final : public detail::OrderedSync {
 public:
  PsSync(Group group, NamedParams params, std::vector<std::vector<int>> buckets, const PsOptions& options)
      : OrderedSync(std::move(group), std::move(params), std::move(buckets), true),
        staleness_(options.staleness),
        copy_(options.staleness > 0),
        push_dtype_(options.push_dtype),
        pull_group_(group_.size() > 1 ? group_.subgroup(members(group_.size()), "ps-pull") : group_) {
    lay_out();
    if (options.graph) map_ops(*options.graph);
    read_.assign(items_.size(), 0);
    free_.resize(items_.size());
    server_.resize(items_.size());
    server_fresh_.assign(items_.size(), 0);
    newest_.assign(items_.size(), -1);
    install_grad_hooks();
  }

  void arm() override {
    if (!rounds_.empty() && rounds_.back().clock == clock_)  // a round per clock: apply() closes it
      throw CommError(group_.member(group_.rank()) + ": ps: arm() twice without apply() between");
    // Spans that ended after the last report (pulls landing in this
    // forward) are kept, timed from the new arm().
    const auto before = start_;
    std::vector<SyncEvent> late(stats_.events.begin() + static_cast<std::ptrdiff_t>(reported_), stats_.events.end());
    OrderedSync::arm();
    const double shift = std::chrono::duration<double>(before - start_).count();
    for (auto& e : late) stats_.events.push_back({e.name, e.start_s + shift, e.end_s + shift});
    Round round;
    round.clock = clock_;
    round.flights.resize(items_.size());
    round.update = std::move(next_update_);
    next_update_ = {};
    rounds_.push_back(std::move(round));
  }

  void set_update(const Update& update) override { next_update_ = update; }

  void apply(const Update& update) override {
    if (rounds_.empty() || rounds_.back().clock != clock_)
      throw CommError(group_.member(group_.rank()) + ": ps: apply() without a backward since the last one");
    rounds_.back().update = update;
    ++clock_;
    report_staleness();
    std::fill(read_.begin(), read_.end(), 0);
    const auto bound = clock_ - 1 - staleness_;
    serve({bound, true});
    receive({gated_ ? -1 : bound, true}, nullptr);
    if (!gated_)  // the next forward reads what is here now
      for (std::size_t b = 0; b < items_.size(); ++b) count_read(b);
    reported_ = stats_.events.size();
    double last = stats_.backward_end_s;
    for (const auto& e : stats_.events) last = std::max(last, e.end_s);
    stats_.exposed_s = last - stats_.backward_end_s;  // pulls waited for by the next forward not included
  }

  OpGate gate() override {
    if (by_op_.empty()) return {};
    gated_ = true;
    return [this](graph::OpId op) {
      auto it = by_op_.find(op);
      if (it == by_op_.end() || rounds_.empty()) return;
      // What the bound requires, and newer pulls that have arrived for a
      // bucket no op has read since apply(): once one has (and saved it for
      // backward), an arrival must not overwrite it in place until the next
      // apply(). Without a server copy (s = 0) server updates write the
      // parameters too, so they wait for apply() (see Note [Server copy]).
      const auto bound = clock_ - 1 - staleness_;
      serve({bound, copy_});
      for (int b : it->second) {
        const std::vector<int> one{b};
        receive({bound, !read_[b]}, &one);
        if (!read_[b]) count_read(b);
        read_[b] = 1;
      }
    };
  }

  void flush() override {
    serve({kNoBound, false});
    receive({kNoBound, false}, nullptr);
    reported_ = stats_.events.size();
    // Everything landed: the parameters hold the server copies, and may be
    // changed (a checkpoint loaded) before the next update reads them again.
    std::fill(server_fresh_.begin(), server_fresh_.end(), 0);
  }

  std::optional<Span> shard(const std::string& name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return span_[it->second];
  }

  std::string name() const override { return "ps"; }

 private:
  static std::vector<int> members(int n) {
    std::vector<int> all(n);
    for (int r = 0; r < n; ++r) all[r] = r;
    return all;
  }

  int size() const { return group_.size(); }
  int me() const { return group_.rank(); }

  void lay_out() {
    const int p = size();
    span_.resize(params_.size());
    for (const auto& item : items_) {
      Layout l;
      l.params = item;
      for (int i : item) {
        l.offset.push_back(l.elements);
        l.elements += params_[i].second.numel();
      }
      l.block = (l.elements + p - 1) / p;
      for (std::size_t k = 0; k < item.size(); ++k) {
        const auto n = params_[item[k]].second.numel();
        const auto lo = std::clamp(l.begin(me()) - l.offset[k], std::int64_t{0}, n);
        const auto hi = std::clamp(l.end(me()) - l.offset[k], lo, n);
        span_[item[k]] = {lo, hi};
      }
      layouts_.push_back(std::move(l));
    }
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const auto& [name, t] = params_[i];
      index_[name] = static_cast<int>(i);
      const double bytes = static_cast<double>(t.numel() * t.element_size());
      const double push_scale = static_cast<double>(c10::elementSize(push_dtype_)) / static_cast<double>(t.element_size());
      stats_.sent[name] = stats_.received[name] = cost::ps_bytes(bytes, p, push_scale);
    }
  }

  void map_ops(const graph::OpGraph& g) {
    std::map<std::string, int> bucket_of;
    for (std::size_t b = 0; b < items_.size(); ++b)
      for (int i : items_[b]) bucket_of[params_[i].first] = static_cast<int>(b);
    for (const auto& op : g.ops())
      for (const auto& p : op.params)
        if (auto it = bucket_of.find(p.name); it != bucket_of.end()) {
          auto& list = by_op_[g.id_of(op.name)];
          if (std::find(list.begin(), list.end(), it->second) == list.end()) list.push_back(it->second);
        }
  }

  // Note [PS buffers]
  // ~~~~~~~~~~~~~~~~~
  // A bucket's flat [P × block] buffers (push out and
  // in, pull out and in) are reused across iterations: a fresh large
  // allocation is a fresh mapping whose every page faults on first touch,
  // which on the 2-core machine cost more than the copies themselves.
  // Pushes are in push_dtype_, pulls in the parameters' dtype.
  torch::Tensor buffer(std::size_t b, torch::ScalarType dtype) {
    auto& free = free_[b];
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->scalar_type() == dtype) {
        auto t = std::move(*it);
        free.erase(it);
        return t;
      }
    const auto& l = layouts_[b];
    return torch::empty({size() * l.block}, params_[l.params.front()].second.options().dtype(dtype).requires_grad(false));
  }
  torch::Tensor push_buffer(std::size_t b) { return buffer(b, push_dtype_); }
  torch::Tensor pull_buffer(std::size_t b) { return buffer(b, params_[layouts_[b].params.front()].second.scalar_type()); }

  void recycle(std::size_t b, torch::Tensor& t) {
    if (t.defined()) free_[b].push_back(std::move(t));
    t = torch::Tensor();
  }

  // A parameter's elements, flat, sharing its storage.
  torch::Tensor flat(int i) const { return params_[i].second.detach().view(-1); }

  // Backward produced bucket b's gradients: push block j to server j.
  void launch(std::size_t b) override {
    const auto& l = layouts_[b];
    auto& f = rounds_.back().flights[b];
    f.sent = push_buffer(b);
    f.sent.narrow(0, l.elements, size() * l.block - l.elements).zero_();
    for (std::size_t k = 0; k < l.params.size(); ++k) {
      const auto n = params_[l.params[k]].second.numel();
      f.sent.narrow(0, l.offset[k], n).copy_(grad_or_zeros(l.params[k]).reshape(-1));
    }
    f.push_start = std::chrono::steady_clock::now();
    if (size() == 1) {
      f.received = f.sent;
    } else {
      f.received = push_buffer(b);
      std::vector<std::int64_t> even;
      auto out = detail::gloo_view(f.received), in = detail::gloo_view(f.sent);
      try {
        f.push = group_.pg().alltoall_base(out, in, even, even);
      } catch (const std::exception& e) {
        fail("push of gradient bucket " + std::to_string(b) + " (" + params_[l.params.front()].first + " ...)", e);
      }
    }
    // Poseidon's overlap: buckets up to b are done with in this backward
    // (their gradients are complete, so no autograd node still reads their
    // parameters), so what has arrived for them — pushes to serve, pulls to
    // land — is taken now, while the layers below are still in backward.
    // With a server copy (s > 0) serving touches no parameter, so every
    // bucket that has arrived is served (see Note [Server copy]).
    serve({-1, true, copy_ ? std::numeric_limits<std::size_t>::max() : b, true});
    receive({-1, true, b, true}, nullptr);
  }

  // Nothing to wait for at the end of backward: pushes complete when their
  // server needs them (serve()).
  void complete(std::size_t) override {}

  // Server side, strictly in (iteration, bucket) order so every member
  // launches its pulls in the same order (Scope says what may be touched).
  void serve(const Scope& scope) {
    for (auto& round : rounds_) {
      const bool current = round.clock >= clock_;
      if (current && (!scope.current || !round.update)) return;
      for (std::size_t b = 0; b < round.flights.size(); ++b) {
        auto& f = round.flights[b];
        if (f.state != Flight::State::kPushing) continue;
        if (b > scope.last_bucket || !f.received.defined()) return;  // not allowed, or not pushed yet
        if (round.clock > scope.bound && (!scope.take_arrived || (f.push && !f.push->isCompleted()))) return;
        update(round, b);
      }
    }
  }

  // Waits for a push or pull of bucket b; a failure names the bucket, the
  // clock and (Group::diagnose) a lost member.
  void wait(c10d::Work& work, const char* what, const Round& round, std::size_t b) {
    try {
      work.wait(group_.timeout());
    } catch (const std::exception& e) {
      fail(std::string(what) + " of gradient bucket " + std::to_string(b) + " (" +
               params_[layouts_[b].params.front()].first + " ...) at clock " + std::to_string(round.clock),
           e);
    }
  }

  // This server's block of bucket b: the P workers' pushed pieces summed
  // in member order, in fp32 (waits for the pushes; once per round).
  const torch::Tensor& summed(Round& round, std::size_t b) {
    const auto& l = layouts_[b];
    auto& f = round.flights[b];
    if (f.sum.defined()) return f.sum;
    if (f.push) wait(*f.push, "push", round, b);
    event("ps push bucket " + std::to_string(b), f.push_start);
    const auto len = l.end(me()) - l.begin(me());
    auto pieces = f.received.view({size(), l.block});
    f.sum = pieces[0].narrow(0, 0, len).to(torch::kFloat);  // a bf16 push: a copy; fp32: the buffer itself
    for (int j = 1; j < size(); ++j) f.sum.add_(pieces[j].narrow(0, 0, len));
    f.push.reset();
    return f.sum;
  }

 public:
  // See Note [Global gradient norm]: the blocks this server serves.
  double grad_square_sum() override {
    if (rounds_.empty() || rounds_.back().clock != clock_)
      throw CommError(group_.member(group_.rank()) + ": ps: grad_square_sum() without a backward since apply()");
    auto& round = rounds_.back();
    double total = 0;
    for (std::size_t b = 0; b < round.flights.size(); ++b) {
      if (round.flights[b].state != Flight::State::kPushing || !round.flights[b].received.defined())
        throw CommError(group_.member(group_.rank()) + ": ps: bucket " + std::to_string(b) +
                        " was updated before the gradient norm (set_update must not be given when clipping)");
      total += square_sum(summed(round, b));
    }
    return total;
  }

 private:
  void update(Round& round, std::size_t b) {
    const auto& l = layouts_[b];
    auto& f = round.flights[b];
    const auto begin = l.begin(me()), len = l.end(me()) - begin;
    auto sum = summed(round, b);
    const auto t0 = std::chrono::steady_clock::now();
    torch::NoGradGuard no_grad;
    if (size() > 1) {  // the push is done with `sent`: the pull's input takes it (two buffers per bucket)
      recycle(b, f.sent);
      f.pull_in = pull_buffer(b);
    }
    if (copy_ && !server_[b].defined())
      server_[b] = torch::empty({len}, params_[l.params.front()].second.options().requires_grad(false));
    auto mine = size() > 1 ? f.pull_in.narrow(0, 0, l.block) : torch::Tensor();
    for (std::size_t k = 0; k < l.params.size(); ++k) {
      const int i = l.params[k];
      const auto& s = span_[i];
      if (s.size() <= 0) continue;
      const auto at = l.offset[k] + s.begin - begin;
      auto values = copy_ ? server_[b].narrow(0, at, s.size()) : flat(i).narrow(0, s.begin, s.size());
      if (copy_ && !server_fresh_[b]) values.copy_(flat(i).narrow(0, s.begin, s.size()));
      round.update(params_[i].first, values, sum.narrow(0, at, s.size()));
      if (mine.defined()) mine.narrow(0, at, s.size()).copy_(values);
    }
    server_fresh_[b] = 1;
    event("ps update bucket " + std::to_string(b), t0);
    if (size() == 1) {
      f.sent = f.received = f.sum = torch::Tensor();
      if (!copy_) {
        f.state = Flight::State::kLanded;
        newest_[b] = round.clock;
        return;
      }
      f.pulled = pull_buffer(b);  // a pull from itself: lands as the gates allow
      f.pulled.copy_(server_[b]);
      f.state = Flight::State::kPulling;
      return;
    }
    f.sum = torch::Tensor();
    recycle(b, f.received);
    // An alltoall whose every block is this server's: Gloo's all-gather took
    // three times as long for the same bytes (docs/benchmarks.md).
    for (int j = 1; j < size(); ++j) f.pull_in.narrow(0, j * l.block, l.block).copy_(mine);
    f.pulled = pull_buffer(b);
    std::vector<std::int64_t> even;
    f.pull_start = std::chrono::steady_clock::now();
    try {
      f.pull = pull_group_.pg().alltoall_base(f.pulled, f.pull_in, even, even);
    } catch (const std::exception& e) {
      fail("pull of gradient bucket " + std::to_string(b), e);
    }
    f.state = Flight::State::kPulling;
  }

  // Worker side: lands pulls into the parameters, per bucket in iteration
  // order (a newer block never gives way to an older one), as `scope`
  // allows; `only`: these buckets (an op's), else all.
  void receive(const Scope& scope, const std::vector<int>* only) {
    auto one = [&](std::size_t b) {
      if (b > scope.last_bucket) return;
      for (auto& round : rounds_) {
        if (round.clock >= clock_ && !scope.current) return;
        auto& f = round.flights[b];
        if (f.state == Flight::State::kLanded) continue;
        if (f.state == Flight::State::kPushing) return;
        if (round.clock > scope.bound && (!scope.take_arrived || (f.pull && !f.pull->isCompleted()))) return;
        land(round, b);
      }
    };
    if (only) {
      for (int b : *only) one(static_cast<std::size_t>(b));
    } else {
      for (std::size_t b = 0; b < items_.size(); ++b) one(b);
    }
    while (!rounds_.empty() && rounds_.front().clock < clock_ && landed(rounds_.front())) rounds_.pop_front();
  }

  static bool landed(const Round& round) {
    for (const auto& f : round.flights)
      if (f.state != Flight::State::kLanded) return false;
    return true;
  }

  void land(Round& round, int b) {
    const auto& l = layouts_[b];
    auto& f = round.flights[b];
    if (f.pull) wait(*f.pull, "pull", round, b);
    torch::NoGradGuard no_grad;
    for (int j = 0; j < size(); ++j) {
      if (j == me() && !copy_) continue;  // the server updated it in place
      const auto begin = l.begin(j), end = l.end(j);
      for (std::size_t k = 0; k < l.params.size(); ++k) {
        const auto n = params_[l.params[k]].second.numel();
        const auto lo = std::max(begin, l.offset[k]), hi = std::min(end, l.offset[k] + n);
        if (hi <= lo) continue;
        flat(l.params[k]).narrow(0, lo - l.offset[k], hi - lo).copy_(f.pulled.narrow(0, j * l.block + lo - begin, hi - lo));
      }
    }
    event("ps pull bucket " + std::to_string(b), f.pull_start);
    f.pull.reset();
    recycle(b, f.pull_in), recycle(b, f.pulled);
    f.state = Flight::State::kLanded;
    newest_[b] = round.clock;
  }

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
  // How many iterations' updates a read of bucket b misses against BSP's
  // (which reads every update up to the last iteration).
  void count_read(std::size_t b) {
    stale_sum_ += static_cast<double>(clock_ - 1 - newest_[b]);
    ++stale_reads_;
  }
  void report_staleness() {
    stats_.read_staleness = stale_reads_ ? stale_sum_ / static_cast<double>(stale_reads_) : 0;
    stale_sum_ = 0, stale_reads_ = 0;
  }

  std::int64_t staleness_ = 0;
  bool copy_ = false;  // See Note [Server copy]
  torch::ScalarType push_dtype_;  // See Note [Push dtype]
  Group pull_group_;
  std::vector<Layout> layouts_;               // by bucket
  std::vector<std::vector<torch::Tensor>> free_;  // by bucket: see Note [PS buffers]
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

}  // namespace

std::unique_ptr<GradSync> make_ps_sync(Group group, NamedParams params, PsOptions options) {
  if (options.staleness < 0) throw CommError("ps: staleness must be >= 0, got " + std::to_string(options.staleness));
  auto buckets = detail::reverse_buckets(params, options.bucket_bytes);
  return std::make_unique<PsSync>(std::move(group), std::move(params), std::move(buckets), options);
}

}  // namespace trident::comm
