// FNV-1a, 64-bit: a stable hash of bytes (identities of indexes and
// batches, seeds from names) that is the same on every machine and build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace trident {

inline constexpr std::uint64_t kFnvOffset = 1469598103934665603ULL;

// `h` continued over `size` bytes at `data`.
inline std::uint64_t fnv1a(const void* data, std::size_t size, std::uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

inline std::uint64_t fnv1a(const std::string& text, std::uint64_t h = kFnvOffset) {
  return fnv1a(text.data(), text.size(), h);
}

}  // namespace trident
