// Poseidon's parameter server: the GradSync interface (arm, gate, apply,
// flush), the layout of blocks and pieces, and read staleness (see the
// split in ps_sync.h).
#include <algorithm>

#include "trident/cost/network.h"
#include "ps_sync.h"

namespace trident::sync::detail {

PsSync::PsSync(comm::Group group, NamedParams params, std::vector<std::vector<int>> buckets, const PsOptions& options)
    : OrderedSync(std::move(group), std::move(params), std::move(buckets), true),
      staleness_(options.staleness),
      copy_(options.staleness > 0),
      push_dtype_(options.push_dtype),
      budget_(options.buffer_bytes),
      pull_group_(group_.size() > 1 ? group_.subgroup(members(group_.size()), "ps-pull") : group_) {
  lay_out(options.bucket_bytes);
  if (options.graph) map_ops(*options.graph);
  read_.assign(items_.size(), 0);
  server_.resize(items_.size());
  server_fresh_.assign(items_.size(), 0);
  newest_.assign(items_.size(), -1);
  install_grad_hooks();
}

void PsSync::arm() {
  if (!rounds_.empty() && rounds_.back().clock == clock_)  // a round per clock: apply() closes it
    throw comm::CommError(group_.member(group_.rank()) + ": ps: arm() twice without apply() between");
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

void PsSync::apply(const Update& update) {
  if (rounds_.empty() || rounds_.back().clock != clock_)
    throw comm::CommError(group_.member(group_.rank()) + ": ps: apply() without a backward since the last one");
  rounds_.back().update = update;
  ++clock_;
  report_staleness();
  std::fill(read_.begin(), read_.end(), 0);
  const auto bound = clock_ - 1 - staleness_;
  serving_ = {bound, true};
  touch_ = {};  // backward is over: every parameter may be touched
  serve(serving_);
  receive({gated_ ? -1 : bound, true}, nullptr);
  issue_pulls();
  if (!gated_)  // the next forward reads what is here now
    for (std::size_t b = 0; b < items_.size(); ++b) count_read(b);
  reported_ = stats_.events.size();
  double last = stats_.backward_end_s;
  for (const auto& e : stats_.events) last = std::max(last, e.end_s);
  stats_.exposed_s = last - stats_.backward_end_s;  // pulls waited for by the next forward not included
}

GradSync::OpGate PsSync::gate() {
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
    serving_ = {bound, copy_};
    touch_ = {-1, false, std::numeric_limits<std::size_t>::max(), false, true};
    serve(serving_);
    for (int b : it->second) {
      const std::vector<int> one{b};
      receive({bound, !read_[b]}, &one);
      if (!read_[b]) count_read(b);
      read_[b] = 1;
    }
    issue_pulls();
  };
}

void PsSync::flush() {
  serving_ = {kNoBound, false};
  touch_ = {};
  serve(serving_);
  receive(serving_, nullptr);
  reported_ = stats_.events.size();
  // Everything landed: the parameters hold the server copies, and may be
  // changed (a checkpoint loaded) before the next update reads them again.
  std::fill(server_fresh_.begin(), server_fresh_.end(), 0);
}

std::optional<GradSync::Span> PsSync::shard(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  return span_[it->second];
}

double PsSync::grad_square_sum() {
  if (rounds_.empty() || rounds_.back().clock != clock_)
    throw comm::CommError(group_.member(group_.rank()) + ": ps: grad_square_sum() without a backward since apply()");
  auto& round = rounds_.back();
  touch_ = {-1, false, std::numeric_limits<std::size_t>::max(), true};  // backward is over
  double total = 0;
  for (std::size_t b = 0; b < round.flights.size(); ++b) {
    const auto& f = round.flights[b];
    if (f.state != Flight::State::kPushing || f.pushed < layouts_[b].pieces)
      throw comm::CommError(group_.member(group_.rank()) + ": ps: bucket " + std::to_string(b) +
                            " was updated before the gradient norm (set_update must not be given when clipping)");
    sum_pushes(round, b, true);
    total += square_sum(f.sum);
  }
  return total;
}

std::vector<int> PsSync::members(int n) {
  std::vector<int> all(n);
  for (int r = 0; r < n; ++r) all[r] = r;
  return all;
}

void PsSync::lay_out(std::int64_t bucket_bytes) {
  const int p = size();
  span_.resize(params_.size());
  // A piece's P rows hold at most a bucket's bytes (see Note [PS pieces]).
  if (!params_.empty()) options_ = params_.front().second.options().requires_grad(false);
  const auto element = static_cast<std::int64_t>(c10::elementSize(options_.dtype().toScalarType()));
  const auto chunk = std::max<std::int64_t>(1, bucket_bytes / element / p);
  std::int64_t widest = 1;
  for (const auto& item : items_) {
    Layout l;
    l.params = item;
    for (int i : item) {
      l.offset.push_back(l.elements);
      l.sizes.push_back(params_[i].second.numel());
      l.elements += l.sizes.back();
    }
    l.block = (l.elements + p - 1) / p;
    l.chunk = std::max<std::int64_t>(1, std::min(chunk, l.block));
    l.pieces = static_cast<int>(std::max<std::int64_t>(1, (l.block + l.chunk - 1) / l.chunk));
    widest = std::max(widest, l.chunk);
    for (std::size_t k = 0; k < item.size(); ++k) {
      const auto n = params_[item[k]].second.numel();
      const auto lo = std::clamp(l.begin(me()) - l.offset[k], std::int64_t{0}, n);
      const auto hi = std::clamp(l.end(me()) - l.offset[k], lo, n);
      span_[item[k]] = {lo, hi};
    }
    layouts_.push_back(std::move(l));
  }
  pool_ = BufferPool(p * widest, options_);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, t] = params_[i];
    index_[name] = static_cast<int>(i);
    const double bytes = static_cast<double>(t.numel() * t.element_size());
    const double push_scale = static_cast<double>(c10::elementSize(push_dtype_)) / static_cast<double>(t.element_size());
    stats_.sent[name] = stats_.received[name] = cost::ps_bytes(bytes, p, push_scale);
  }
}

void PsSync::map_ops(const graph::OpGraph& g) {
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

void PsSync::count_read(std::size_t b) {
  stale_sum_ += static_cast<double>(clock_ - 1 - newest_[b]);
  ++stale_reads_;
}

void PsSync::report_staleness() {
  stats_.read_staleness = stale_reads_ ? stale_sum_ / static_cast<double>(stale_reads_) : 0;
  stale_sum_ = 0, stale_reads_ = 0;
}

}  // namespace trident::sync::detail

namespace trident::sync {

std::unique_ptr<GradSync> make_ps_sync(comm::Group group, NamedParams params, PsOptions options) {
  if (options.staleness < 0) throw comm::CommError("ps: staleness must be >= 0, got " + std::to_string(options.staleness));
  if (options.buffer_bytes < 1)
    throw comm::CommError("ps: buffer_bytes must be >= 1, got " + std::to_string(options.buffer_bytes));
  auto buckets = detail::reverse_buckets(params, options.bucket_bytes);
  return std::make_unique<detail::PsSync>(std::move(group), std::move(params), std::move(buckets), options);
}

}  // namespace trident::sync
