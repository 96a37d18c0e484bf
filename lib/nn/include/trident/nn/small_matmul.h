// Products of many small matrices, as attention computes them per head.
//
// Note [Small batched products]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The CPU `bmm` of LibTorch 1.13 (without
// MKL, as Debian builds it) multiplies a batch by slicing out each matrix
// (`select`, three tensors a matrix) and dispatching `addmm` on it, unless a
// product is under 400 multiply-adds. For attention's per-head products
// (8×8 by 8×8 in the tiny multi-modal transformer, 28×16 by 16×28 in the
// tiny transformer) that bookkeeping, not the arithmetic, is the cost: on
// mmt, 20,288 `select` calls and 30 of 53 ms of a training step, against
// 2 ms for the same `bmm` in PyTorch 2.x. `batched_matmul` calls the same
// BLAS `sgemm` on each matrix directly, batch split over threads, so it
// computes what `bmm` computes, with no tensor made per matrix; every other
// product goes to torch. Measured per call on this machine (1 thread, 256
// matrices): 2.1–7.6× faster than `bmm` from 8×8·8×8 to 28×28·28×16; 1.2× at
// 32×32·32×32 (64 matrices); slower at 64×64·64×64 — hence the bound.
// With the wheel's LibTorch 2.15, whose `bmm` has MKL's batched products,
// the path still wins on mmt's step: 5,715–7,206 samples/s against
// 5,094–6,382 through `bmm` (3 alternating runs, 2 threads, AMD Zen 4).
#pragma once

#include <torch/torch.h>

namespace trident::nn {

// The largest m·k·n for which `batched_matmul` calls BLAS per matrix.
inline constexpr std::int64_t kSmallProductLimit = 32 * 32 * 32;

// True when `batched_matmul(a, b)` calls BLAS per matrix: float32 CPU
// tensors [..., m, k] and [..., k, n] of rank ≥ 3 with equal leading sizes
// and 400 ≤ m·k·n ≤ kSmallProductLimit.
bool uses_small_path(const torch::Tensor& a, const torch::Tensor& b);

// torch::matmul(a, b), with gradients; batches of small matrices go through
// per-matrix BLAS calls of Note [Small batched products].
torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace trident::nn
