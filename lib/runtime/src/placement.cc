#include "trident/runtime/placement.h"

#include <cstdlib>

#include <torch/cuda.h>
#include <torch/version.h>

#include "trident/runtime/config.h"

#ifdef TRIDENT_CUDA
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace trident::runtime {

bool Placement::cuda_build() {
#ifdef TRIDENT_CUDA
  return true;
#else
  return false;
#endif
}

Placement Placement::choose(const std::string& device, int local_rank) {
  if (device == "cpu") return Placement();
  if (device != "cuda") throw ConfigError("train.device: '" + device + "' is not a device; allowed: cpu, cuda");
  if (!cuda_build())
    throw ConfigError("train.device: 'cuda' needs trident's CUDA build, and this one is CPU-only (LibTorch " +
                      std::string(TORCH_VERSION) + "); build it with `make build-cuda` (docs/gpu.md)");
  const auto visible = static_cast<int>(torch::cuda::device_count());
  if (visible == 0) {
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    throw ConfigError("train.device: 'cuda', but this process sees no CUDA device" +
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

torch::Tensor Placement::state(const torch::Tensor& t) const {
  return on_gpu() && t.dim() > 0 ? t.to(device_) : t;
}

}  // namespace trident::runtime
