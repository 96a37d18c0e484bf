#include "trident/data/loader.h"

#include <chrono>

namespace trident::data {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// At most this many following ids are tried in place of a bad sample.
constexpr std::int64_t kMostReplacements = 64;

}  // namespace

struct Loader::Job {
  Batch batch;
  std::int64_t remaining = 0;
  std::exception_ptr error;
};

Loader::Loader(std::shared_ptr<const Source> source, std::function<torch::Tensor(std::int64_t)> batch_ids,
               std::function<std::int64_t(std::int64_t)> epoch_of, LoaderOptions options)
    : source_(std::move(source)), batch_ids_(std::move(batch_ids)), epoch_of_(std::move(epoch_of)), options_(options) {
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { work(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    tasks_.clear();
  }
  work_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_ptr<Loader::Job> Loader::submit(const Source& source, const torch::Tensor& ids,
                                            const std::set<std::string>& fields, std::int64_t epoch) {
  auto job = std::make_shared<Job>();
  const auto n = ids.size(0);
  job->batch = source.allocate(n, fields);
  job->remaining = n;
  const auto* id = ids.data_ptr<std::int64_t>();
  std::vector<Task> tasks(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    auto& t = tasks[static_cast<std::size_t>(i)];
    t.job = job, t.source = &source, t.id = id[i], t.epoch = epoch;
    for (auto& [field, column] : job->batch) t.rows[field] = column[i];
  }
  if (threads_.empty()) {
    for (auto& t : tasks) run(t);
    return job;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : tasks) tasks_.push_back(std::move(t));
  }
  work_ready_.notify_all();
  return job;
}

void Loader::run(Task& task) {
  const auto t0 = std::chrono::steady_clock::now();
  std::exception_ptr error;
  try {
    task.source->read_sample(task.id, task.epoch, task.rows);
  } catch (const Error& e) {
    if (!options_.skip_bad || e.kind() != ErrorKind::kBadInput) {
      error = std::current_exception();
    } else {
      error = std::current_exception();
      const auto n = task.source->size();
      for (std::int64_t k = 1; k <= std::min(kMostReplacements, n - 1) && error; ++k) {
        const auto other = (task.id + k) % n;
        try {
          task.source->read_sample(other, task.epoch, task.rows);
          error = nullptr;
          std::lock_guard<std::mutex> lock(mu_);
          if (bad_ids_.insert(task.id).second) bad_.push_back({task.id, other, e.what()});
        } catch (const Error&) {
        }
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(mu_);
  read_s_ += seconds_since(t0);
  ++samples_;
  if (error && !task.job->error) task.job->error = error;
  --task.job->remaining;
  job_done_.notify_all();
}

void Loader::work() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    run(task);
  }
}

Batch Loader::wait(Job& job) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  job_done_.wait(lock, [&] { return job.remaining == 0; });
  wait_s_ += seconds_since(t0);
  if (job.error) std::rethrow_exception(job.error);
  return job.batch;
}

Batch Loader::read(const Source& source, const torch::Tensor& ids, const std::set<std::string>& fields,
                   std::int64_t epoch) {
  if (!source.streams()) {
    const auto t0 = std::chrono::steady_clock::now();
    auto b = source.read(ids, fields, epoch);
    std::lock_guard<std::mutex> lock(mu_);
    wait_s_ += seconds_since(t0);
    return b;
  }
  auto job = submit(source, ids, fields, epoch);
  return wait(*job);
}

void Loader::prefetch_from(std::int64_t step) {
  next_step_ = std::max(next_step_, step);
  for (; next_step_ < step + options_.prefetch + 1; ++next_step_) {
    const auto ids = batch_ids_(next_step_);
    auto& ranges = ahead_[next_step_];
    for (const auto& r : ranges_)
      ranges[r] = submit(*source_, ids.slice(0, r.begin, r.end), fields_, epoch_of_(next_step_));
  }
}

Batch Loader::rows(std::int64_t step, std::int64_t begin, std::int64_t end, const std::set<std::string>& fields) {
  if (!learned_ && !threads_.empty() && source_->streams()) {
    if (learning_step_ < 0) learning_step_ = step;
    if (step == learning_step_) {
      ranges_.insert({begin, end});
      fields_.insert(fields.begin(), fields.end());
    } else {
      learned_ = true;
    }
  }
  if (learned_) {
    ahead_.erase(ahead_.begin(), ahead_.lower_bound(step));  // steps done: their memory goes
    prefetch_from(step);
    const auto& ranges = ahead_[step];
    const auto it = ranges.find({begin, end});
    bool covered = it != ranges.end();
    for (const auto& f : fields) covered = covered && fields_.count(f);
    if (covered) {
      const auto all = wait(*it->second);
      Batch b;
      for (const auto& f : fields) b[f] = all.at(f);
      return b;
    }
  }
  return read(*source_, batch_ids_(step).slice(0, begin, end), fields, epoch_of_(step));
}

double Loader::take_wait_s() {
  std::lock_guard<std::mutex> lock(mu_);
  const double w = wait_s_;
  wait_s_ = 0;
  return w;
}

std::int64_t Loader::samples_read() const {
  std::lock_guard<std::mutex> lock(mu_);
  return samples_;
}

double Loader::read_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return read_s_;
}

std::vector<BadSample> Loader::bad() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bad_;
}

}  // namespace trident::data
