// Placement: where one process's tensors live — the one place that decides.
//
// Note [Placement]
// ~~~~~~~~~~~~~~~~
// `train.device` is cpu (the default) or cuda. With cuda,
// the process with LOCAL_RANK r uses GPU r modulo the visible GPUs (one
// process per GPU, as DDP); its stage's module lives there, so do the
// gradients and the optimizer state, which are made like the parameters;
// StageExecutor's receive buffers are made there; batches are copied there
// through pinned host memory without blocking the host; checkpoints are
// written from host copies and read back onto the device. Communication
// follows the tensors (see Note [Backends] in comm/group.h): NCCL
// carries CUDA tensors on its own streams, each collective ordered after
// the stream that produced its input by a CUDA event, so the wait-free
// backpropagation all-reduces overlap backward as they do on CPU; the small
// CPU tensors (loss sums, preflight) travel by the CPU backend.
//
// Note [Pipeline transfers on GPUs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Stage-to-stage messages live where
// the stage does: on the GPU, NCCL carries them device to device. NCCL
// ignores tags and runs all operations between two ranks of a communicator
// in issue order on one stream, and a receive blocks that stream until its
// send comes. StageExecutor posts receives ahead (see Note [Tags]): on one
// communicator, the gradients a stage awaits from its successor would hold
// up the activations it sends that successor, and the two stages would
// wait for each other. So on a GPU the messages take one link (a process
// group) per direction: activations on one, gradients on the other, and
// between two ranks only one of them ever sends on each link. The rest
// follows: each rank sends a peer its messages in the order the peer posts
// their receives (in-order matching suffices), and at start every pair of
// ranks that exchanges meets once on each link, in one order on every rank,
// so NCCL connects its pair communicators there rather than inside a
// receive posted ahead, where two pairs connecting in opposite orders could
// wait on each other. Tests hold the CPU path to the same rules: with
// with_link_per_direction(), the store backend's kStreamPerPair matching
// runs each pair's operations in issue order, as NCCL's streams do
// (pipeline_test's Pipeline.TransfersOverTheStoreBackend...).
//
// A device the build or the machine cannot give is bad input (exit 2):
// the CPU build says how to get the CUDA build; the CUDA build names the
// device it did not find.
#pragma once

#include <memory>
#include <string>

#include <torch/torch.h>

#include "trident/nn/graph_executor.h"
#include "trident/executor/trace.h"

namespace trident::executor {

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
  // The clock of a step's compute spans (see Note [GPU spans] in trace.h): CUDA
  // events on the GPU; none on the CPU, whose spans take host times.
  std::unique_ptr<DeviceClock> clock() const;
  // The most bytes this process's tensors held on its GPU at once (LibTorch's
  // CUDA allocator); 0 on the CPU.
  std::int64_t peak_device_bytes() const;
  // Whether stage-to-stage messages take one link per direction (Note
  // [Pipeline transfers on GPUs]): always on a GPU.
  bool link_per_direction() const { return on_gpu() || link_per_direction_; }
  // This placement with a link per direction on the CPU too (tests).
  Placement with_link_per_direction() const {
    Placement p = *this;
    p.link_per_direction_ = true;
    return p;
  }

 private:
  explicit Placement(torch::Device device) : device_(device) {}
  torch::Device device_ = torch::kCPU;
  bool link_per_direction_ = false;
};

}  // namespace trident::executor
