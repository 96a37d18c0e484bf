#include "trident/nn/op_profile.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace trident::nn {
namespace {

using Clock = std::chrono::steady_clock;

// One op in flight on this thread (see Note [Op self time]).
struct Timing : at::ObserverContext {
  Clock::time_point start = Clock::now();
  double children_s = 0;  // time in the ops it called
};

std::mutex totals_mutex;
std::map<std::string, OpTotals> counted;  // guarded by totals_mutex
bool in_use = false;                      // guarded by totals_mutex
std::atomic<std::uint64_t> generation{0}; // which OpProfile counts (one per construction)

// The ops in flight on this thread, innermost last. Ops end in the reverse
// order they start on a thread; entries of an earlier OpProfile (whose ops
// were in flight when it stopped, and may be gone) are dropped unread.
struct InFlight {
  Timing* timing;
  std::uint64_t generation;
};
thread_local std::vector<InFlight> in_flight;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  // c10d's collectives start on the caller's thread and end on a worker's:
  // they are waits, not ops, and are left to the time outside ops.
  if (fn.isAsync()) return nullptr;
  auto t = std::make_unique<Timing>();
  const auto now = generation.load();
  while (!in_flight.empty() && in_flight.back().generation != now) in_flight.pop_back();
  in_flight.push_back({t.get(), now});
  return t;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  auto* t = static_cast<Timing*>(context);
  if (!t) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - t->start).count();
  const auto it = std::find_if(in_flight.rbegin(), in_flight.rend(), [&](const InFlight& f) { return f.timing == t; });
  if (it == in_flight.rend()) return;  // dropped, or started on another thread
  const auto at = std::next(it).base();
  const auto started_in = at->generation;
  if (at != in_flight.begin()) std::prev(at)->timing->children_s += elapsed;  // its caller, of its generation
  in_flight.erase(at);
  std::lock_guard<std::mutex> lock(totals_mutex);
  if (!in_use || started_in != generation.load()) return;  // ended after its profile stopped
  auto& totals = counted[fn.name()];
  totals.self_s += elapsed - t->children_s;
  ++totals.calls;
}

}  // namespace

OpProfile::OpProfile() : start_(Clock::now()) {
  {
    std::lock_guard<std::mutex> lock(totals_mutex);
    if (in_use) throw std::logic_error("OpProfile: another profile is already counting");
    in_use = true;
    counted.clear();
    ++generation;
  }
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end));
}

OpProfile::~OpProfile() { stop(); }

void OpProfile::stop() {
  if (!counting_) return;
  at::removeCallback(handle_);
  end_ = Clock::now();
  counting_ = false;
  std::lock_guard<std::mutex> lock(totals_mutex);
  in_use = false;
}

std::map<std::string, OpTotals> OpProfile::totals() const {
  std::lock_guard<std::mutex> lock(totals_mutex);
  return counted;
}

double OpProfile::wall_s() const {
  return std::chrono::duration<double>((counting_ ? Clock::now() : end_) - start_).count();
}

}  // namespace trident::nn
