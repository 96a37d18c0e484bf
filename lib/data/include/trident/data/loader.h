// Reads a run's batches ahead of training, on worker threads, with bounded
// memory (Note [Loader]).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trident/data/source.h"

namespace trident::data {

// Note [Loader]
// ~~~~~~~~~~~~~
// A stage asks for rows [begin, end) of a step's global batch, with its
// fields (executor::FieldSource). The rows a rank asks for are the same
// every training step — the plan fixes them — so the loader learns them
// from the first step it serves (reading that step at once) and from then
// on reads steps ahead: up to `prefetch` steps are queued, each sample of
// each range a task for the `workers` threads, which write into the
// step's preallocated tensors. A request it did not learn is read at
// once. Memory: at most prefetch + 1 steps of this rank's rows.
//
// Which samples a step holds is the sampler's pure function of the step
// (data/sampler.h) and each sample a pure function of (id, epoch) (Note
// [Sources]), so prefetching, the number of workers and the order they
// finish in change nothing a step sees.
//
// A sample that cannot be read stops the run (its DataError, naming the
// file and sample id, surfaces where the step asks for it), unless
// `skip_bad`: then it is replaced by the next sample id (wrapping) that
// reads, a pure function of the id again, and recorded (bad()).
struct LoaderOptions {
  int workers = 0;   // threads; 0: read in the caller's thread, nothing ahead
  int prefetch = 2;  // steps read ahead
  bool skip_bad = false;
};

struct BadSample {
  std::int64_t id = 0, replaced_by = 0;
  std::string error;
};

class Loader {
 public:
  // `batch_ids(step)`: the step's global batch (int64 ids); `epoch_of(step)`.
  Loader(std::shared_ptr<const Source> source, std::function<torch::Tensor(std::int64_t)> batch_ids,
         std::function<std::int64_t(std::int64_t)> epoch_of, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Rows [begin, end) of step `step`'s global batch, with `fields`.
  Batch rows(std::int64_t step, std::int64_t begin, std::int64_t end, const std::set<std::string>& fields);
  // `ids` of `source` (this loader's, or another split's) now, spread over
  // the workers (evaluation; labels).
  Batch read(const Source& source, const torch::Tensor& ids, const std::set<std::string>& fields, std::int64_t epoch);

  // Seconds rows() and read() waited for samples since the last call.
  double take_wait_s();
  // Samples read so far, and the seconds the workers spent reading them.
  std::int64_t samples_read() const;
  double read_seconds() const;
  std::vector<BadSample> bad() const;
  int workers() const { return static_cast<int>(threads_.size()); }

 private:
  struct Job;
  struct Task {
    std::shared_ptr<Job> job;
    const Source* source = nullptr;
    std::int64_t id = 0, epoch = 0;
    std::map<std::string, torch::Tensor> rows;
  };
  struct Range {
    std::int64_t begin = 0, end = 0;
    bool operator<(const Range& o) const { return std::tie(begin, end) < std::tie(o.begin, o.end); }
  };

  std::shared_ptr<Job> submit(const Source& source, const torch::Tensor& ids, const std::set<std::string>& fields,
                              std::int64_t epoch);
  Batch wait(Job& job);
  void work();
  void run(Task& task);
  void prefetch_from(std::int64_t step);

  std::shared_ptr<const Source> source_;
  std::function<torch::Tensor(std::int64_t)> batch_ids_;
  std::function<std::int64_t(std::int64_t)> epoch_of_;
  LoaderOptions options_;

  // Learning the rows of a step (Note [Loader]).
  std::int64_t learning_step_ = -1;
  std::set<Range> ranges_;
  std::set<std::string> fields_;
  bool learned_ = false;
  // Steps queued or done: step -> range -> job.
  std::map<std::int64_t, std::map<Range, std::shared_ptr<Job>>> ahead_;
  std::int64_t next_step_ = 0;  // the first step not yet queued

  mutable std::mutex mu_;
  std::condition_variable work_ready_, job_done_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  double wait_s_ = 0, read_s_ = 0;
  std::int64_t samples_ = 0;
  std::vector<BadSample> bad_;
  std::set<std::int64_t> bad_ids_;
};

}  // namespace trident::data
