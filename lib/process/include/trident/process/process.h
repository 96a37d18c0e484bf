// Process-wide settings that decide CPU training speed, applied once at
// start by the trainer (and the benchmarks, so they time what users get).
//
// Note [CPU process settings]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Two defaults of this platform cost more than half the step time, measured
// on the 2-core machine (docs/benchmarks.md):
// - Threads. Debian's LibTorch does not forward torch::set_num_threads to
//   OpenBLAS, whose own pool then spins against torch's: the mlp step ran
//   2.6x slower at 1 thread. We set OpenBLAS's pool too (found with dlsym, so
//   nothing links against OpenBLAS directly).
// - Allocator. glibc serves blocks above 128 KiB with mmap and returns them
//   at free, so every activation of that size costs fresh page faults each
//   step (high system time). Raising the mmap threshold to its maximum
//   (32 MiB) and the trim threshold to 256 MiB keeps those blocks in the heap:
//   the mmt step ran 2.2x and the inception step 1.8x faster. Memory freed
//   by a step stays reserved for the next one (up to 256 MiB) instead of
//   going back to the kernel.
// - One thread pool. OpenBLAS is Debian's OpenMP build, and it runs on
//   LibTorch's own libgomp (cmake/wheel.cmake links the wheel's libgomp
//   first), so BLAS and ATen share one pool of workers, and a product called
//   inside one of ATen's parallel loops (the blocks of LibTorch's fused
//   attention) runs on its caller's thread, as MKL does in PyTorch. With
//   OpenBLAS's pthreads build, its pool and ATen's took turns on the cores:
//   OpenMP's workers had to wait passively (OMP_WAIT_POLICY=PASSIVE, which
//   trident set until 2026-12-05) or the mlp step ran 2-3x slower, and
//   OpenBLAS's spinning workers cost gpt2-124m 15% of its step in
//   sched_yield. With one pool, libgomp's default wait (spin briefly, then
//   sleep) serves best: 2 threads on AMD Zen 4, mlp +26%, transformer +25%,
//   mmt +33%, cnn +26% against pthreads with the passive wait
//   (docs/benchmarks/threads.md).
// - BLAS kernel. prepare_process re-executes once to run the OpenBLAS
//   kernel chosen by Note [BLAS kernel] (blas.h) where OpenBLAS fell back to
//   a generic one.
#pragma once

#include <string>

#include "trident/base/cores.h"

namespace trident::process {

// Note [Thread defaults]
// ~~~~~~~~~~~~~~~~~~~~~~
// train.threads = 0 divides the host's cores among the job's processes on it
// (at least one thread each), as torchrun does when it starts several: with
// every process taking all cores, 2 processes on 2 cores ran 7x slower
// (docs/benchmarks.md). `reason` says how the count was chosen, for the
// run's first line.
struct ThreadChoice {
  int threads = 1;
  std::string reason;
};
ThreadChoice choose_threads(int requested, int cores, int local_processes);

// Sets torch's and OpenBLAS's thread counts and tunes glibc malloc as in
// See Note [CPU process settings].
void configure_process(int threads);

// Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX-BF16 in
// /proc/cpuinfo's flags). Without either, LibTorch 1.13 emulates bf16
// products, measured 20× slower than fp32 (docs/benchmarks/precision.md).
bool cpu_has_bf16();
// The CPU flags of /proc/cpuinfo's first processor ("" when unreadable).
std::string cpu_flags();
// The instruction set oneDNN (LibTorch's bf16 products and convolutions)
// dispatches to on this CPU, in oneDNN's words ("avx512_core_bf16",
// "avx512_core_amx", "avx2", ...; "unknown" when libdnnl is not loaded).
std::string onednn_isa();

// Note [ATen CPU kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~
// ATen's own kernels — elementwise ops, softmax, norms, reductions, the
// optimizer's arithmetic: what neither the BLAS nor oneDNN computes — are
// built for AVX2 and for AVX-512, and one set is chosen at the first
// dispatch: LibTorch 1.13 takes AVX2 even on AVX-512 CPUs unless
// ATEN_CPU_CAPABILITY says otherwise. Measured with bench/run_kernels.sh
// (docs/benchmarks/precision.md): on AMD Zen 4 the AVX-512 set ran trident's
// training steps at 0.90-1.05x of AVX2's in fp32 and bf16 (1 thread), and
// the issue that asked for it saw no model-level change on Sapphire Rapids
// either (a bf16 softmax alone 1.6x faster). So trident keeps LibTorch's
// choice; an ATEN_CPU_CAPABILITY the user sets is honoured, and
// `trident version` and the run's first line name the set that runs.
// "AVX2", "AVX512" or "NO AVX" (LibTorch's own words), and how it came to run.
std::string aten_kernels();

// Process start of the commands that compute: chooses the BLAS kernel
// (see Note [BLAS kernel] in blas.h); when that changed the environment,
// re-executes this program with `argv` once (returns only when nothing
// changed, or the exec failed). Throws Failure when a
// OPENBLAS_CORETYPE set outside trident computes wrong products.
void prepare_process(char** argv);

// Runs this program again with `argv` and the current environment (returns
// only if the exec failed).
void reexecute(char** argv);

}  // namespace trident::process
