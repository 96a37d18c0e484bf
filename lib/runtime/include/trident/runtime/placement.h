// Placement: where one process's tensors live — the one place that decides.
//
// Note [Placement]: `train.device` is cpu (the default) or cuda. With cuda,
// the process with LOCAL_RANK r uses GPU r modulo the visible GPUs (one
// process per GPU, as DDP); its stage's module lives there, so do the
// gradients and the optimizer state, which are made like the parameters;
// StageExecutor's receive buffers are made there; batches are copied there
// through pinned host memory without blocking the host; checkpoints are
// written from host copies and read back onto the device. Communication
// follows the tensors (Note [Backends] in lib/comm/src/backends.cc): NCCL
// carries CUDA tensors on its own streams, each collective ordered after
// the stream that produced its input by a CUDA event, so the wait-free
// backpropagation all-reduces overlap backward as they do on CPU; the small
// CPU tensors (loss sums, preflight) travel by the CPU backend.
//
// Note [Pipeline transfers on GPUs]: stage-to-stage messages travel through
// host memory for now (wire() is the CPU), carried by the CPU backend, which
// matches messages by tag. NCCL ignores tags and runs a pair's sends and
// receives in issue order on one stream; StageExecutor posts receives ahead
// (Note [Tags]), so a receive posted ahead would hold up a send behind it on
// that stream, and two stages can wait on each other. Moving transfers to
// NCCL needs one communicator per direction (forward sends and backward
// sends on streams of their own) and a GPU to test it on; until then the
// pipeline is correct on GPUs and pays two host copies per message. What
// such a move relies on is tested already: each rank sends a peer its
// messages in the order the peer posts their receives, so matching in order
// and matching by tag give the same result (pipeline_test's
// Pipeline.TransfersOverTheStoreBackendMatchedByTagOrInOrder...).
//
// A device the build or the machine cannot give is bad input (exit 2):
// the CPU build says how to get the CUDA build; the CUDA build names the
// device it did not find.
#pragma once

#include <string>

#include <torch/torch.h>

#include "trident/nn/executor.h"

namespace trident::runtime {

class Placement {
 public:
  Placement() = default;  // the CPU
  // Checks `device` ("cpu" | "cuda") against this build and machine and
  // picks the GPU of `local_rank`; throws ConfigError (bad input).
  static Placement choose(const std::string& device, int local_rank);
  // True in a build against a CUDA LibTorch (TRIDENT_CUDA).
  static bool cuda_build();

  const torch::Device& device() const { return device_; }
  bool on_gpu() const { return device_.is_cuda(); }
  // "cpu", or "cuda:1 (NVIDIA H200)".
  std::string describe() const;

  // Moves a module's parameters and buffers here.
  void place(torch::nn::Module& module) const;
  // A batch's fields here (from host memory: pinned, copied asynchronously).
  nn::Batch batch(nn::Batch fields) const;
  // A tensor read from a checkpoint, here; a scalar (an optimizer's step
  // count) stays on the host, where it is read.
  torch::Tensor state(const torch::Tensor& t) const;
  // Where stage-to-stage messages travel (Note [Pipeline transfers on GPUs]).
  torch::Device wire() const { return torch::kCPU; }
  // A message for the wire, and a received one for this device.
  torch::Tensor departing(const torch::Tensor& t) const { return t.to(wire()); }
  torch::Tensor arrived(const torch::Tensor& t) const { return t.to(device_, /*non_blocking=*/true); }

 private:
  explicit Placement(torch::Device device) : device_(device) {}
  torch::Device device_ = torch::kCPU;
};

}  // namespace trident::runtime
