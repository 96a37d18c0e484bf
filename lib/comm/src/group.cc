#include "trident/comm/group.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "backends.h"
#include "trident/base/test_hooks.h"
#include "trident/base/text.h"

namespace trident::comm {
namespace {

// Heartbeats: a beat every kBeatPeriod; diagnose() samples the beats twice,
// kDiagnoseGap apart (three periods: a live rank beats at least twice in
// between), each store read waiting at most kStoreReadTimeout.
constexpr auto kBeatPeriod = std::chrono::milliseconds(500);
constexpr auto kDiagnoseGap = 3 * kBeatPeriod;
constexpr auto kStoreReadTimeout = std::chrono::seconds(2);
constexpr auto kStoreLinger = std::chrono::seconds(8);
// See Note [A bounded diagnosis]: connecting, two samples and the writes.
constexpr auto kDiagnoseDeadline = kDiagnoseGap + 3 * kStoreReadTimeout;

// "ADDR:PORT" of the rendezvous store, for messages.
std::string rendezvous(const WorldInfo& world) { return world.master_addr + ":" + std::to_string(world.master_port); }

std::string store_unreachable(const WorldInfo& world) {
  return "the rendezvous store on rank 0 (" + rendezvous(world) + ") is unreachable: rank 0 stopped responding";
}

// A client of the store (TCPStore clients are not shared across threads).
c10::intrusive_ptr<c10d::TCPStore> store_client(const WorldInfo& world, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(world.master_port);
  opts.isServer = false;
  opts.waitWorkers = false;
  opts.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(world.master_addr, opts);
}

}  // namespace

// A thread that writes this rank's beat counter into the store every
// kBeatPeriod, over its own store client (TCPStore clients are not shared
// across threads).
class Heartbeat {
 public:
  Heartbeat(const WorldInfo& world, std::chrono::milliseconds timeout)
      : world_(world), rank_(world.rank), size_(world.world_size) {
    store_ = store_client(world, timeout);
    const auto host = host_name();  // for the diagnosis of others
    store_->set("host/" + std::to_string(rank_), std::vector<std::uint8_t>(host.begin(), host.end()));
    thread_ = std::thread([this] {
      std::int64_t beat = 0;
      while (!stop_) {
        try {
          std::lock_guard<std::mutex> lock(mu_);
          const auto text = std::to_string(++beat);
          store_->set(heartbeat_key(rank_), std::vector<std::uint8_t>(text.begin(), text.end()));
        } catch (const std::exception&) {
          // The store is gone; diagnose() reports it.
        }
        // Sleep in slices so that the destructor does not wait a whole period.
        for (int i = 0; i < 5 && !stop_; ++i) std::this_thread::sleep_for(kBeatPeriod / 5);
      }
    });
  }
  ~Heartbeat() {
    // See Note [Rank 0 stays for the diagnosis] (Group destroys its process
    // group first, so the others' collectives have failed by now).
    if (rank_ == 0 && diagnosed_) wait_for_diagnoses();
    stop_ = true;
    thread_.join();
  }

  std::string diagnose() {
    diagnosed_ = true;
    delay_for_test();
    // Note [A bounded diagnosis]
    // ~~~~~~~~~~~~~~~~~~~~~~~~~~
    // On a cut link a store read never returns
    // (TCPStore's reads in LibTorch 1.13 wait without a timeout), so the
    // reads run on a thread of their own, over a client of their own, and
    // the diagnosis gives up on them after kDiagnoseDeadline. A thread left
    // behind owns everything it touches and ends with the process.
    auto result = std::make_shared<Diagnosis>();
    result->stopped.assign(static_cast<std::size_t>(size_), 0);
    std::thread([result, world = world_, rank = rank_, size = size_] { sample_beats(*result, world, rank, size); })
        .detach();
    std::unique_lock<std::mutex> lock(result->mu);
    if (!result->done.wait_for(lock, kDiagnoseDeadline, [&] { return result->finished; }))
      return store_unreachable(world_);
    stopped_ = result->stopped;
    return result->message;
  }

 private:
  static std::string host_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("an unnamed host");
  }
  // What a diagnosis found, filled by sample_beats on its own thread.
  struct Diagnosis {
    std::mutex mu;
    std::condition_variable done;
    bool finished = false;
    std::string message;        // "" when every other rank still beats
    std::vector<char> stopped;  // by rank
  };

  // Samples every rank's beat twice, kDiagnoseGap apart, over a store client
  // of its own; names the ranks whose beat stood still, with the host each
  // said it runs on; writes that this rank has diagnosed.
  static void sample_beats(Diagnosis& out, const WorldInfo& world, int rank, int size) {
    std::string message;
    std::vector<char> stopped(static_cast<std::size_t>(size), 0);
    try {
      const auto store = store_client(world, kStoreReadTimeout);
      auto read = [&](const std::string& key, std::string fallback) {
        if (!store->check({key})) return fallback;
        const auto v = store->get(key);
        return std::string(v.begin(), v.end());
      };
      auto sample = [&] {
        std::vector<std::string> beats(static_cast<std::size_t>(size));
        for (int r = 0; r < size; ++r) beats[r] = read(heartbeat_key(r), "");
        return beats;
      };
      const auto before = sample();
      std::this_thread::sleep_for(kDiagnoseGap);
      const auto after = sample();
      std::string lost, hosts;
      for (int r = 0; r < size; ++r) {
        stopped[r] = r != rank && before[r] == after[r];
        if (!stopped[r]) continue;
        lost += (lost.empty() ? "" : ", ") + std::to_string(r);
        hosts += (hosts.empty() ? "" : ", ") + read("host/" + std::to_string(r), "an unknown host");
      }
      store->set("diagnosed/" + std::to_string(rank), std::vector<std::uint8_t>{'1'});
      if (!lost.empty())
        message = (lost.find(',') == std::string::npos ? "rank " : "ranks ") + lost + " stopped responding (on " +
                  hosts + ")";
    } catch (const std::exception&) {
      message = store_unreachable(world);
    }
    std::lock_guard<std::mutex> lock(out.mu);
    out.message = message;
    out.stopped = stopped;
    out.finished = true;
    out.done.notify_all();
  }

  // Fault injection for the late-diagnosis test: TRIDENT_TEST_DIAGNOSE_DELAY=R:MS
  // makes rank R wait MS milliseconds before it diagnoses.
  void delay_for_test() const {
    const auto hook = test_hooks::diagnose_delay_ms();  // See Note [Test hooks]
    if (hook && hook->rank == rank_) std::this_thread::sleep_for(std::chrono::milliseconds(hook->value));
  }

  // Rank 0: until every rank that was alive at its diagnosis has diagnosed
  // too, or kStoreLinger has passed.
  void wait_for_diagnoses() {
    const auto until = std::chrono::steady_clock::now() + kStoreLinger;
    for (int r = 1; r < size_; ++r) {
      if (stopped_[r]) continue;
      const std::string key = "diagnosed/" + std::to_string(r);
      while (std::chrono::steady_clock::now() < until) {
        try {
          std::lock_guard<std::mutex> lock(mu_);
          if (store_->check({key})) break;
        } catch (const std::exception&) {
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  WorldInfo world_;
  int rank_, size_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::mutex mu_;
  std::atomic<bool> stop_{false}, diagnosed_{false};
  std::vector<char> stopped_ = std::vector<char>(static_cast<std::size_t>(size_), 0);  // by rank, at the diagnosis
  std::thread thread_;
};

namespace {

bool is_local(const std::string& addr) { return addr == "127.0.0.1" || addr == "localhost"; }

}  // namespace

Group::Group(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank, int size,
             std::chrono::milliseconds timeout, std::string host)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout), host_(std::move(host)),
      pg_(std::move(pg)) {
  for (int r = 0; r < size; ++r) world_ranks_.push_back(r);
}

Group Group::with_process_group(c10::intrusive_ptr<c10d::ProcessGroup> pg) const {
  Group g = *this;
  g.pg_ = std::move(pg);
  return g;
}

Group Group::made_by(Maker make) const {
  Group g = *this;
  g.maker_ = std::make_shared<const Maker>(std::move(make));
  g.pg_ = (*g.maker_)(c10::make_intrusive<c10d::PrefixStore>("made", store_), rank_, size_, timeout_);
  return g;
}

std::string Group::member(int r) const {
  const auto world = "rank " + std::to_string(world_rank(r));
  return name_ == "world" ? world : world + " (member " + std::to_string(r) + " of '" + name_ + "')";
}

namespace {

void check_job(c10d::Store& store, const WorldInfo& world, std::chrono::milliseconds timeout) {
  const std::string key = "trident/job";
  if (world.rank == 0) {
    store.set(key, std::vector<std::uint8_t>(world.job_id.begin(), world.job_id.end()));
    return;
  }
  store.wait({key}, timeout);
  const auto v = store.get(key);
  const std::string theirs(v.begin(), v.end());
  if (world.job_id.empty() || theirs.empty() || theirs == world.job_id) return;
  throw CommError("rank " + std::to_string(world.rank) + " of job '" + world.job_id + "' reached the rendezvous of job '" +
                      theirs + "' at " + rendezvous(world) +
                      "; give each job its own MASTER_PORT",
                  ErrorKind::kBadInput);
}

void wait_for_arrivals(c10d::Store& store, const WorldInfo& world, std::chrono::milliseconds timeout) {
  store.set("trident/arrived/" + std::to_string(world.rank), std::vector<std::uint8_t>{1});
  store.add("trident/arrivals", 1);
  const auto limit = timeout + timeout / 2 + std::chrono::seconds(2);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (store.add("trident/arrivals", 0) < world.world_size) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (int r = 0; r < world.world_size; ++r)
        if (!store.check({"trident/arrived/" + std::to_string(r)})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw CommError("rank " + std::to_string(world.rank) + ": rank(s) " + missing + " did not reach the rendezvous at " +
                      rendezvous(world) + " within " + format_number("%.1f", limit.count() / 1000.0) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

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
                    rendezvous(world) + " within " +
                    std::to_string(timeout.count()) + " ms (" + first_line(e) + ")");
  }
  report_started();  // the rendezvous is reachable: from here a failure is the job's, not this slot's
  try {
    check_job(*store, world, timeout);
    wait_for_arrivals(*store, world, timeout);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(world.rank) + ": waiting at the rendezvous store at " +
                    rendezvous(world) + " failed: " + first_line(e));
  }
  try {
    const std::string host = is_local(world.master_addr) ? "127.0.0.1" : "";
    Group g(store, c10::intrusive_ptr<c10d::ProcessGroup>(), world.rank, world.world_size, timeout, host);
    g.root_store_ = store;
    g.pg_ = make_process_group(store, world.rank, world.world_size, timeout, host, g.beats());
    g.heartbeat_ = std::make_shared<Heartbeat>(world, timeout);
    return g;
  } catch (const std::exception& e) {
    throw CommError("rank " + std::to_string(world.rank) + ": connecting to the other " +
                    std::to_string(world.world_size - 1) + " ranks failed: " + first_line(e));
  }
}

Group Group::over_store(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout) {
  auto pg = make_process_group(store, rank, size, timeout, "127.0.0.1");
  return Group(std::move(store), pg, rank, size, timeout, "127.0.0.1");
}

Group Group::subgroup(const std::vector<int>& ranks, const std::string& name) const {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end())
    throw CommError(member(rank_) + " is not in group '" + name + "'");
  auto store = c10::make_intrusive<c10d::PrefixStore>("group/" + name, store_);
  const int r = static_cast<int>(it - ranks.begin()), n = static_cast<int>(ranks.size());
  Group g(store, c10::intrusive_ptr<c10d::ProcessGroup>(), r, n, timeout_, host_);
  g.name_ = name;
  for (int i = 0; i < n; ++i) g.world_ranks_[static_cast<std::size_t>(i)] = world_rank(ranks[static_cast<std::size_t>(i)]);
  g.root_store_ = root_store_;
  g.maker_ = maker_;
  g.pg_ = maker_ ? (*maker_)(store, r, n, timeout_) : make_process_group(store, r, n, timeout_, host_, g.beats());
  // The heartbeat speaks of world ranks; only a group over all of them can use it.
  if (n == size_) g.heartbeat_ = heartbeat_;
  return g;
}

std::vector<std::string> allgather_strings(const Group& group, const std::string& mine, const std::string& what) {
  const auto wait = [&](const c10::intrusive_ptr<c10d::Work>& work) {
    try {
      work->wait(group.timeout());
    } catch (const std::exception& e) {
      const auto lost = group.diagnose();
      throw CommError(group.member(group.rank()) + ": " + what + " failed" + (lost.empty() ? "" : " (" + lost + ")") +
                      ": " + first_line(e));
    }
  };
  const int n = group.size();
  auto sizes = torch::zeros({n}, torch::kInt64);
  sizes[group.rank()] = static_cast<std::int64_t>(mine.size());
  std::vector<at::Tensor> sv{sizes};
  wait(group.pg().allreduce(sv));
  const auto longest = std::max<std::int64_t>(1, sizes.max().item<std::int64_t>());
  auto buffer = torch::zeros({longest}, torch::kUInt8);
  std::memcpy(buffer.data_ptr(), mine.data(), mine.size());
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < n; ++r) all[0].push_back(torch::empty_like(buffer));
  std::vector<at::Tensor> in{buffer};
  wait(group.pg().allgather(all, in));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(static_cast<const char*>(all[0][r].data_ptr()), sizes[r].item<std::int64_t>());
  return out;
}

std::optional<Beats> Group::beats() const {
  if (!root_store_) return std::nullopt;
  return Beats{root_store_, world_ranks_};
}

std::string Group::diagnose() const { return heartbeat_ ? heartbeat_->diagnose() : ""; }

}  // namespace trident::comm
