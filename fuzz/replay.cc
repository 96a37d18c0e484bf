// The replay driver (fuzz/README.md): links with one fuzz target in place of
// libFuzzer and feeds it every file under the paths it is given — the seed
// corpus and the regressions — once each, as `make test` runs them (ctest
// `fuzz_replay_TARGET`). A target accepts an input by returning; anything
// that escapes it (an exception other than trident::Error, which the target
// itself catches) fails the replay, naming the file. Timed fuzzing, with
// sanitizers, is `make fuzz` (scripts/fuzz.sh).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> files_under(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_regular_file(root)) return {root};
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::uint8_t> bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " PATH... (files, or folders of inputs)\n";
    return 2;
  }
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::filesystem::exists(argv[i])) {
      std::cerr << argv[0] << ": " << argv[i] << " does not exist\n";
      return 2;
    }
    for (const auto& file : files_under(argv[i])) {
      const auto bytes = bytes_of(file);
      try {
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        std::cerr << "replay: " << file.string() << " escaped the target: " << e.what() << "\n";
        return 1;
      } catch (...) {
        std::cerr << "replay: " << file.string() << " escaped the target with a non-standard exception\n";
        return 1;
      }
      ++inputs;
    }
  }
  std::cout << inputs << " inputs replayed, none escaped\n";
  return inputs > 0 ? 0 : 1;
}
