#include "trident/process/blas_kernel.h"

#include <strings.h>

#include <algorithm>
#include <iterator>
#include <utility>

namespace trident::process {

CpuFeatures this_cpu() {
  __builtin_cpu_init();
  CpuFeatures c;
  c.avx = __builtin_cpu_supports("avx");
  c.avx2 = __builtin_cpu_supports("avx2");
  c.fma = __builtin_cpu_supports("fma");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512bw = __builtin_cpu_supports("avx512bw");
  c.avx512vl = __builtin_cpu_supports("avx512vl");
  c.avx512dq = __builtin_cpu_supports("avx512dq");
  c.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  return c;
}

SimdLevel best_level(const CpuFeatures& c) {
  const bool avx512 = c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq;
  if (avx512 && c.avx512bf16) return SimdLevel::kAvx512Bf16;
  if (avx512) return SimdLevel::kAvx512;
  if (c.avx2 && c.fma) return SimdLevel::kAvx2;
  if (c.avx) return SimdLevel::kAvx;
  return SimdLevel::kSse;
}

std::optional<SimdLevel> kernel_level(const std::string& corename) {
  // OpenBLAS 0.3.21's x86-64 families (driver/others/dynamic.c), by what they need.
  static const std::pair<const char*, SimdLevel> kFamilies[] = {
      {"Katmai", SimdLevel::kSse},         {"Coppermine", SimdLevel::kSse},   {"Northwood", SimdLevel::kSse},
      {"Prescott", SimdLevel::kSse},       {"Banias", SimdLevel::kSse},       {"Atom", SimdLevel::kSse},
      {"Core2", SimdLevel::kSse},          {"Penryn", SimdLevel::kSse},       {"Dunnington", SimdLevel::kSse},
      {"Nehalem", SimdLevel::kSse},        {"Athlon", SimdLevel::kSse},       {"Opteron", SimdLevel::kSse},
      {"Opteron_SSE3", SimdLevel::kSse},   {"Barcelona", SimdLevel::kSse},    {"Nano", SimdLevel::kSse},
      {"Bobcat", SimdLevel::kSse},         {"Sandybridge", SimdLevel::kAvx},  {"Bulldozer", SimdLevel::kAvx},
      {"Piledriver", SimdLevel::kAvx},     {"Steamroller", SimdLevel::kAvx},  {"Excavator", SimdLevel::kAvx2},
      {"Haswell", SimdLevel::kAvx2},       {"Zen", SimdLevel::kAvx2},         {"SkylakeX", SimdLevel::kAvx512},
      {"Cooperlake", SimdLevel::kAvx512Bf16}, {"SapphireRapids", SimdLevel::kAvx512Bf16},
  };
  for (const auto& [name, level] : kFamilies)
    if (::strcasecmp(name, corename.c_str()) == 0) return level;
  return std::nullopt;
}

std::string kernel_for(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512Bf16: return "Cooperlake";
    case SimdLevel::kAvx512: return "SkylakeX";
    case SimdLevel::kAvx2: return "Haswell";
    case SimdLevel::kAvx: return "Sandybridge";
    case SimdLevel::kSse: return "";
  }
  return "";
}

std::string better_kernel(const std::string& detected, const CpuFeatures& cpu) {
  const auto has = kernel_level(detected);
  if (!has) return "";
  const SimdLevel best = best_level(cpu);
  // For float32 products BF16 adds nothing: compare at most AVX-512.
  const auto fp32 = [](SimdLevel l) { return std::min(l, SimdLevel::kAvx512); };
  if (fp32(*has) >= fp32(best)) return "";
  return kernel_for(best);
}

namespace {
constexpr const char* kVerdicts[] = {"kept", "user", "chose", "refused"};
}  // namespace

// Fields joined by tabs, the reason last (it may hold anything but a NUL).
std::string encode_blas_choice(const BlasChoice& choice) {
  return std::string(kVerdicts[static_cast<int>(choice.verdict)]) + "\t" + choice.kernel + "\t" + choice.detected +
         "\t" + choice.why;
}

std::optional<BlasChoice> decode_blas_choice(const std::string& text) {
  std::string fields[3];
  std::size_t at = 0;
  for (auto& field : fields) {
    const auto tab = text.find('\t', at);
    if (tab == std::string::npos) return std::nullopt;
    field = text.substr(at, tab - at);
    at = tab + 1;
  }
  BlasChoice choice;
  const auto* verdict = std::find(std::begin(kVerdicts), std::end(kVerdicts), fields[0]);
  if (verdict == std::end(kVerdicts)) return std::nullopt;
  choice.verdict = static_cast<BlasChoice::Verdict>(verdict - std::begin(kVerdicts));
  choice.kernel = fields[1];
  choice.detected = fields[2];
  choice.why = text.substr(at);
  return choice;
}

}  // namespace trident::process
