// Shared by the libFuzzer targets (fuzz/README.md): each target feeds its
// bytes to one parser of outside input, exactly as trident reads that input,
// and accepts only two endings — the parse succeeds, or it throws a
// trident::Error, whose message is the one clear line the user sees. Any
// other exception (a JSON library's type_error, std::out_of_range, ...) is
// a bug: it escapes the target, and libFuzzer reports it as a crash, as it
// does AddressSanitizer's and UndefinedBehaviorSanitizer's findings.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "trident/base/error.h"

namespace trident::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The bytes as a file, for parsers that read one (the same file every call
// of this process, in the temporary directory).
inline std::string input_file(const std::uint8_t* data, std::size_t size, const std::string& suffix) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("trident-fuzz-" + std::to_string(::getpid()) + suffix)).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

// Runs `parse`; a trident::Error is an accepted ending.
template <class F>
void expect_clear_error(F&& parse) {
  try {
    parse();
  } catch (const trident::Error&) {
  }
}

}  // namespace trident::fuzz
