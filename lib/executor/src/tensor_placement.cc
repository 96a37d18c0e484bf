#include "trident/executor/tensor_placement.h"

#include <cstdlib>

#include <torch/cuda.h>
#include <torch/version.h>

#include "trident/config/config.h"

#ifdef TRIDENT_CUDA
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#include <cmath>
#include <deque>
#endif

namespace trident::executor {

bool Placement::cuda_build() {
#ifdef TRIDENT_CUDA
  return true;
#else
  return false;
#endif
}

Placement Placement::choose(const std::string& device, int local_rank) {
  if (device == "cpu") return Placement();
  if (device != "cuda") throw config::ConfigError("train.device: '" + device + "' is not a device; allowed: cpu, cuda");
  if (!cuda_build())
    throw config::ConfigError("train.device: 'cuda' needs trident's CUDA build, and this one is CPU-only (LibTorch " +
                              std::string(TORCH_VERSION) + "); build it with `make build-cuda` (docs/gpu.md)");
  const auto visible = static_cast<int>(torch::cuda::device_count());
  if (visible == 0) {
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    throw config::ConfigError("train.device: 'cuda', but this process sees no CUDA device" +
                              std::string(env ? " (CUDA_VISIBLE_DEVICES='" + std::string(env) + "')" : "") +
                              "; run on a machine with an NVIDIA GPU and its driver, or set train.device=cpu");
  }
#ifdef TRIDENT_CUDA
  // The same weights as one CPU process within float32 rounding (docs/gpu.md): no TF32.
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
#endif
  const torch::Device gpu(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % visible));
#ifdef TRIDENT_CUDA
  c10::cuda::set_device(gpu.index());  // NCCL and the current stream follow the process's GPU
#endif
  return Placement(gpu);
}

std::string Placement::describe() const {
  if (!on_gpu()) return "cpu";
  std::string name;
#ifdef TRIDENT_CUDA
  name = std::string(" (") + at::cuda::getDeviceProperties(device_.index())->name + ")";
#endif
  return device_.str() + name;
}

void Placement::place(torch::nn::Module& module) const {
  if (on_gpu()) module.to(device_);
}

nn::Batch Placement::batch(nn::Batch fields) const {
  if (!on_gpu()) return fields;
  for (auto& [name, t] : fields)
    if (t.device() != device_) t = t.pin_memory().to(device_, /*non_blocking=*/true);
  return fields;
}

#ifdef TRIDENT_CUDA
namespace {

// A timed CUDA event, through the CUDA runtime's own API: the same in every
// LibTorch 2.x (LibTorch moved its event class between versions).
class TimedEvent {
 public:
  TimedEvent() { C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDefault)); }
  TimedEvent(const TimedEvent&) = delete;
  TimedEvent& operator=(const TimedEvent&) = delete;
  ~TimedEvent() { cudaEventDestroy(event_); }
  void record() { C10_CUDA_CHECK(cudaEventRecord(event_, at::cuda::getCurrentCUDAStream())); }
  void wait() { C10_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Milliseconds from `earlier` to this event; both have completed.
  double since(const TimedEvent& earlier) const {
    float ms = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms, earlier.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// See Note [GPU spans] (trace.h): marks are events on the current stream. Their
// times are measured from an anchor: an event recorded on an idle stream
// and waited for, at a known system-clock time. times() re-anchors after
// each step (the stream is idle then), so the GPU's clock and the host's
// cannot drift apart by more than a step's worth.
class CudaClock final : public DeviceClock {
 public:
  CudaClock() { anchor(); }
  std::int64_t mark() override {
    marks_.emplace_back();
    marks_.back().record();
    return static_cast<std::int64_t>(marks_.size()) - 1;
  }
  std::vector<std::int64_t> times() override {
    std::vector<std::int64_t> out;
    for (auto& m : marks_) {
      m.wait();
      out.push_back(anchor_us_ + std::llround(m.since(*anchor_) * 1000.0));
    }
    marks_.clear();
    anchor();
    return out;
  }

 private:
  void anchor() {
    at::cuda::getCurrentCUDAStream().synchronize();
    anchor_ = std::make_unique<TimedEvent>();
    anchor_->record();
    anchor_->wait();
    anchor_us_ = now_us();
  }
  std::unique_ptr<TimedEvent> anchor_;
  std::int64_t anchor_us_ = 0;
  std::deque<TimedEvent> marks_;  // a deque: events stay where they were made
};

}  // namespace
#endif

std::int64_t Placement::peak_device_bytes() const {
#ifdef TRIDENT_CUDA
  if (on_gpu())
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index()).allocated_bytes[0].peak;  // 0: all pools
#endif
  return 0;
}

std::unique_ptr<DeviceClock> Placement::clock() const {
#ifdef TRIDENT_CUDA
  if (on_gpu()) return std::make_unique<CudaClock>();
#endif
  return nullptr;
}

torch::Tensor Placement::state(const torch::Tensor& t) const {
  return on_gpu() && t.dim() > 0 ? t.to(device_) : t;
}

}  // namespace trident::executor
