// Which OpenBLAS kernel family this CPU should run (see Note [BLAS kernel] in
// process/blas.h). Torch-free and pure but for `this_cpu`: the process start
// (process::prepare_process) asks `better_kernel` whether the kernel OpenBLAS
// detected is a generic fallback on a CPU that can do better, and which
// kernel to try instead; the runtime then checks that kernel before it keeps
// it.
#pragma once

#include <optional>
#include <string>

namespace trident::process {

// The x86-64 instruction sets that decide which OpenBLAS kernels can run,
// ordered: each level includes the ones below it.
enum class SimdLevel { kSse = 0, kAvx = 1, kAvx2 = 2, kAvx512 = 3, kAvx512Bf16 = 4 };

struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512bf16 = false;
};

// This CPU's features, from cpuid.
CpuFeatures this_cpu();

// The highest level the CPU supports in full (AVX-512 needs F, BW, VL and DQ,
// as OpenBLAS's SkylakeX kernels do; AVX2 needs FMA too).
SimdLevel best_level(const CpuFeatures& cpu);

// The level an OpenBLAS (0.3.x, x86-64) kernel family needs, by the name
// `openblas_get_corename()` returns, in any letter case; nullopt for a name
// it does not know (another architecture, a newer OpenBLAS).
std::optional<SimdLevel> kernel_level(const std::string& corename);

// The kernel family trident asks for at a level ("" for kSse: nothing to gain).
std::string kernel_for(SimdLevel level);

// The kernel to try instead of `detected`, or "" to keep it. A kernel is a
// fallback when it needs less than the CPU offers for float32 products
// (BF16 adds nothing there, so SkylakeX on a BF16 CPU is kept); the kernel
// tried is the best family the CPU supports. An unknown name is kept.
std::string better_kernel(const std::string& detected, const CpuFeatures& cpu);

// What the process start decided about the kernel, handed to the process it
// re-executes (and its children) in one environment variable; written and
// read only by this pair of functions.
struct BlasChoice {
  enum class Verdict { kKept, kUser, kChose, kRefused };
  Verdict verdict = Verdict::kKept;
  std::string kernel;    // kept: the detected one; user: OPENBLAS_CORETYPE; chose, refused: the candidate
  std::string detected;  // chose: the kernel it replaced
  std::string why;       // refused: why the candidate failed its check
};
std::string encode_blas_choice(const BlasChoice& choice);
// nullopt for text encode_blas_choice did not write.
std::optional<BlasChoice> decode_blas_choice(const std::string& text);

}  // namespace trident::process
