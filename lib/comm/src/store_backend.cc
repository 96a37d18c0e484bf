#include "trident/comm/store_backend.h"

#include <cstring>
#include <deque>
#include <functional>
#include <stdexcept>

#include <torch/torch.h>

#include "trident/comm/world.h"  // CommError

namespace trident::comm {

namespace {

// A Work that does its reading when first waited for (see the header).
class DeferredWork final : public c10d::Work {
 public:
  explicit DeferredWork(std::function<void(std::chrono::milliseconds)> run) : run_(std::move(run)) {}
  bool isCompleted() override {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }
  bool isSuccess() const override { return !error_; }
  std::exception_ptr exception() const override { return error_; }
  bool wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ran_) {
      try {
        if (run_) run_(timeout);
      } catch (...) {
        error_ = std::current_exception();
      }
      ran_ = true;
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  std::function<void(std::chrono::milliseconds)> run_;
  std::mutex mu_;
  bool ran_ = false;
  std::exception_ptr error_;
};

c10::intrusive_ptr<c10d::Work> deferred(std::function<void(std::chrono::milliseconds)> run) {
  return c10::make_intrusive<DeferredWork>(std::move(run));
}

void check_sum(const c10d::ReduceOp& op, const char* what) {
  auto copy = op;
  TORCH_CHECK(copy == c10d::ReduceOp::SUM, "trident-store ", what, " supports only a sum");
}

const at::Tensor& only(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "trident-store ", what, " takes one tensor, got ", tensors.size());
  TORCH_CHECK(tensors[0].device().is_cpu(), "trident-store ", what, " carries CPU tensors only");
  return tensors[0];
}

}  // namespace

StoreBackend::StoreBackend(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                           std::chrono::milliseconds timeout, Matching matching, std::optional<Beats> beats)
    : c10d::Backend(rank, size), store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout),
      matching_(matching), beats_(std::move(beats)) {
  TORCH_CHECK(!beats_ || static_cast<int>(beats_->world_ranks.size()) == size,
              "trident-store: beats name ", beats_ ? beats_->world_ranks.size() : 0, " world ranks for ", size,
              " members");
}

std::string StoreBackend::message_key(int src, int dst, int tag, std::int64_t n) const {
  return "sb/p" + std::to_string(src) + "-" + std::to_string(dst) + "/" + std::to_string(tag) + "/" + std::to_string(n);
}

std::chrono::milliseconds StoreBackend::limit(std::chrono::milliseconds asked) const {
  return asked.count() > 0 ? asked : timeout_;  // 0 (no timeout given) or unset (-1): the group's
}

std::string StoreBackend::next_collective() {
  std::lock_guard<std::mutex> lock(mu_);
  return "sb/c" + std::to_string(collectives_++) + "/";
}

void StoreBackend::put(const std::string& key, const at::Tensor& t) {
  const auto c = t.contiguous();
  const auto* p = static_cast<const std::uint8_t*>(c.data_ptr());
  store_->set(key, std::vector<std::uint8_t>(p, p + c.numel() * c.element_size()));
}

int StoreBackend::who(int member) const {
  return beats_ ? beats_->world_ranks.at(static_cast<std::size_t>(member)) : member;
}

std::string StoreBackend::beat_of(int writer) const {
  const auto key = heartbeat_key(who(writer));
  if (!beats_->store->check({key})) return "";
  const auto v = beats_->store->get(key);
  return std::string(v.begin(), v.end());
}

// See Note [Lost writers].
void StoreBackend::wait_for(const std::string& key, int writer, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now(), deadline = start + timeout;
  const auto failure = [&](const std::string& why) {
    return std::runtime_error("trident-store: rank " + std::to_string(who(rank_)) + " waited " +
                              std::to_string(timeout.count()) + " ms for '" + key + "': " + why);
  };
  std::optional<std::string> beat;  // read only once a slice has passed: most messages are there by then
  auto beat_moved = start;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const bool last = !beats_ || left <= kWaitSlice;
    try {
      store_->wait({key}, last ? std::max(left, std::chrono::milliseconds(1)) : kWaitSlice);
      return;
    } catch (const std::exception& e) {
      if (last) throw failure(e.what());
    }
    std::string now;
    try {
      now = beat_of(writer);
    } catch (const std::exception& e) {
      throw failure(std::string("the store stopped answering: ") + e.what());
    }
    if (!beat || now != *beat || now.empty()) {
      beat = now;
      beat_moved = Clock::now();
    } else if (Clock::now() - beat_moved >= kSilence) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      throw CommError("trident-store: rank " + std::to_string(who(rank_)) + " stopped waiting for '" +
                               key + "' after " + std::to_string(waited) + " ms: rank " + std::to_string(who(writer)) +
                               " stopped beating (its heartbeat stood still for " +
                               std::to_string(kSilence.count()) + " ms)");
    }
  }
}

at::Tensor StoreBackend::take(const std::string& key, int writer, const at::Tensor& like,
                              std::chrono::milliseconds timeout) {
  wait_for(key, writer, timeout);
  const auto bytes = store_->get(key);
  const auto expected = static_cast<std::size_t>(like.numel() * like.element_size());
  TORCH_CHECK(bytes.size() == expected, "trident-store: '", key, "' holds ", bytes.size(), " bytes, expected ",
              expected);
  auto out = torch::empty(like.sizes(), like.options().memory_format(at::MemoryFormat::Contiguous));
  if (expected) std::memcpy(out.data_ptr(), bytes.data(), expected);
  return out;
}

at::Tensor StoreBackend::sum_in_rank_order(const std::string& prefix, const at::Tensor& mine,
                                           std::chrono::milliseconds timeout, int own,
                                           std::vector<std::string>& keys) {
  at::Tensor sum;
  for (int r = 0; r < size_; ++r) {
    at::Tensor part;
    if (r == own) {
      part = mine.clone();
    } else {
      keys.push_back(prefix + std::to_string(r));
      part = take(keys.back(), r, mine, timeout);
    }
    sum = r == 0 ? part : sum.add_(part);
  }
  return sum;
}

void StoreBackend::done_reading(const std::string& prefix, int readers, const std::vector<std::string>& keys) {
  if (store_->add(prefix + "read", 1) < readers) return;
  for (const auto& k : keys) store_->deleteKey(k);
  store_->deleteKey(prefix + "read");
}

c10::intrusive_ptr<c10d::Work> StoreBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  check_sum(opts.reduceOp, "allreduce");
  auto t = only(tensors, "allreduce");
  const auto prefix = next_collective();
  put(prefix + std::to_string(rank_), t);
  return deferred([this, t, prefix, wanted = opts.timeout](std::chrono::milliseconds asked) mutable {
    std::vector<std::string> keys;
    t.copy_(sum_in_rank_order(prefix, t, limit(wanted.count() > 0 ? wanted : asked), -1, keys));
    done_reading(prefix, size_, keys);
  });
}

c10::intrusive_ptr<c10d::Work> StoreBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  auto t = only(tensors, "broadcast");
  const auto prefix = next_collective();
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ == root) {
    put(prefix + "root", t);
    if (size_ == 1) store_->deleteKey(prefix + "root");
    return deferred(nullptr);
  }
  return deferred([this, t, prefix, root, wanted = opts.timeout](std::chrono::milliseconds asked) mutable {
    t.copy_(take(prefix + "root", root, t, limit(wanted.count() > 0 ? wanted : asked)));
    done_reading(prefix, size_ - 1, {prefix + "root"});
  });
}

c10::intrusive_ptr<c10d::Work> StoreBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  check_sum(opts.reduceOp, "reduce");
  auto t = only(tensors, "reduce");
  const auto prefix = next_collective();
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ != root) {
    put(prefix + std::to_string(rank_), t);
    return deferred(nullptr);
  }
  return deferred([this, t, prefix, root, wanted = opts.timeout](std::chrono::milliseconds asked) mutable {
    std::vector<std::string> keys;
    t.copy_(sum_in_rank_order(prefix, t, limit(wanted.count() > 0 ? wanted : asked), root, keys));
    for (const auto& k : keys) store_->deleteKey(k);
  });
}

c10::intrusive_ptr<c10d::Work> StoreBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  auto t = only(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<std::size_t>(size_),
              "trident-store allgather needs one output per member");
  auto out = outputs[0];
  const auto prefix = next_collective();
  put(prefix + std::to_string(rank_), t);
  return deferred([this, out, t, prefix, wanted = opts.timeout](std::chrono::milliseconds asked) mutable {
    const auto timeout = limit(wanted.count() > 0 ? wanted : asked);
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) {
      keys.push_back(prefix + std::to_string(r));
      out[static_cast<std::size_t>(r)].copy_(take(keys.back(), r, out[static_cast<std::size_t>(r)], timeout));
    }
    done_reading(prefix, size_, keys);
  });
}

c10::intrusive_ptr<c10d::Work> StoreBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<std::int64_t>& output_splits,
                                                           std::vector<std::int64_t>& input_splits,
                                                           const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(output_splits.empty() && input_splits.empty(), "trident-store alltoall_base takes equal splits only");
  TORCH_CHECK(input.device().is_cpu() && output.device().is_cpu(), "trident-store alltoall_base carries CPU tensors only");
  TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0,
              "trident-store alltoall_base needs input and output of one size divisible by ", size_, " members, got ",
              input.numel(), " and ", output.numel());
  const auto prefix = next_collective();
  const auto block = input.numel() / size_;
  const auto in = input.reshape(-1);
  auto key = [prefix](int from, int to) { return prefix + std::to_string(from) + ">" + std::to_string(to); };
  for (int r = 0; r < size_; ++r)
    if (r != rank_) put(key(rank_, r), in.narrow(0, r * block, block).contiguous());
  auto own = in.narrow(0, rank_ * block, block).clone();
  auto out = output;
  return deferred([this, out, own, block, key, wanted = opts.timeout](std::chrono::milliseconds asked) mutable {
    const auto timeout = limit(wanted.count() > 0 ? wanted : asked);
    auto flat = out.view(-1);
    for (int r = 0; r < size_; ++r) {
      auto part = flat.narrow(0, r * block, block);
      if (r == rank_) {
        part.copy_(own);
        continue;
      }
      part.copy_(take(key(r, rank_), r, own, timeout));
      store_->deleteKey(key(r, rank_));
    }
  });
}

c10::intrusive_ptr<c10d::Work> StoreBackend::barrier(const c10d::BarrierOptions& opts) {
  std::vector<at::Tensor> one{torch::zeros({1})};
  c10d::AllreduceOptions o;
  o.timeout = opts.timeout;
  return allreduce(one, o);
}

// One queue of this rank's operations with one peer (kStreamPerPair).
struct StoreBackend::Stream {
  std::mutex mu;
  std::deque<std::pair<bool, std::function<void(std::chrono::milliseconds)>>> ops;  // (is send, run)
  std::int64_t issued = 0, done = 0;
  // Runs the operations in order until `until` have run, or while the next is a send.
  void advance(std::int64_t until, std::chrono::milliseconds timeout) {
    while (!ops.empty() && (done < until || ops.front().first)) {
      auto run = std::move(ops.front().second);
      ops.pop_front();
      ++done;
      run(timeout);
    }
  }
};

c10::intrusive_ptr<c10d::Work> StoreBackend::on_stream(int peer, bool is_send,
                                                       std::function<void(std::chrono::milliseconds)> run) {
  std::shared_ptr<Stream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = streams_[peer];
    if (!slot) slot = std::make_shared<Stream>();
    stream = slot;
  }
  std::lock_guard<std::mutex> lock(stream->mu);
  stream->ops.emplace_back(is_send, std::move(run));
  const auto id = ++stream->issued;
  stream->advance(0, timeout_);  // a send at the head of the queue goes at once
  return deferred([this, stream, id](std::chrono::milliseconds asked) {
    std::lock_guard<std::mutex> lock(stream->mu);
    stream->advance(id, limit(asked));
  });
}

c10::intrusive_ptr<c10d::Work> StoreBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const auto& t = only(tensors, "send");
  if (matching_ != Matching::kByTag) tag = 0;
  std::int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = sent_[{dst, tag}]++;
  }
  const auto key = message_key(rank_, dst, tag, n);
  if (matching_ == Matching::kStreamPerPair)
    return on_stream(dst, true, [this, key, t](std::chrono::milliseconds) { put(key, t); });  // read when it runs, as NCCL
  put(key, t);
  return deferred(nullptr);
}

c10::intrusive_ptr<c10d::Work> StoreBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  auto t = only(tensors, "recv");
  if (matching_ != Matching::kByTag) tag = 0;
  std::int64_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = received_[{src, tag}]++;
  }
  const auto key = message_key(src, rank_, tag, n);
  auto run = [this, t, key, src](std::chrono::milliseconds asked) mutable {
    t.copy_(take(key, src, t, limit(asked)));
    store_->deleteKey(key);
  };
  if (matching_ == Matching::kStreamPerPair) return on_stream(src, false, std::move(run));
  return deferred(std::move(run));
}

c10::intrusive_ptr<c10d::ProcessGroup> store_process_group(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                                                           std::chrono::milliseconds timeout, Matching matching,
                                                           std::optional<Beats> beats) {
  auto backend = c10::make_intrusive<StoreBackend>(store, rank, size, timeout, matching, std::move(beats));
  using Type = c10d::ProcessGroup::BackendType;
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(std::move(store), rank, size);
  pg->setBackend(c10::DeviceType::CPU, Type::CUSTOM, backend);
  pg->setDefaultBackend(Type::CUSTOM);
  return pg;
}

}  // namespace trident::comm
