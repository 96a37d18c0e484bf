#include "trident/formats/token_files.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace trident::formats {
namespace {

template <class T>
T little(const std::string& b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);  // the files are little-endian, as x86 and ARM are
  return v;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot be read");
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TokenFile parse_megatron_idx(const std::string& b, std::uint64_t bin_bytes, const std::string& origin) {
  static const std::string kMagic("MMIDIDX\0\0", 9);
  if (b.size() < 34 || b.compare(0, 9, kMagic) != 0)
    throw DataError(origin + ": not a Megatron index (it must begin with MMIDIDX and hold at least 34 bytes)");
  if (little<std::uint64_t>(b, 9) != 1)
    throw DataError(origin + ": index version " + std::to_string(little<std::uint64_t>(b, 9)) + "; version 1 is read");
  TokenFile f;
  switch (static_cast<unsigned char>(b[17])) {
    case 1: f.item_bytes = 1; break;
    case 2: f.item_bytes = 1, f.is_signed = true; break;
    case 3: f.item_bytes = 2, f.is_signed = true; break;
    case 4: f.item_bytes = 4, f.is_signed = true; break;
    case 5: f.item_bytes = 8, f.is_signed = true; break;
    case 8: f.item_bytes = 2; break;
    default:
      throw DataError(origin + ": dtype code " + std::to_string(static_cast<unsigned char>(b[17])) +
                      " is not an integer type; token ids are uint8 (1), int8 (2), int16 (3), int32 (4), int64 (5) "
                      "or uint16 (8)");
  }
  const auto sequences = little<std::uint64_t>(b, 18), documents = little<std::uint64_t>(b, 26);
  const std::uint64_t room = (b.size() - 34);
  if (sequences > room / 12 || documents > (room - sequences * 12) / 8)
    throw DataError(origin + ": says " + std::to_string(sequences) + " sequences and " + std::to_string(documents) +
                    " documents but holds " + std::to_string(b.size()) + " bytes");
  std::uint64_t expect = 0;
  for (std::uint64_t i = 0; i < sequences; ++i) {
    const auto size = little<std::int32_t>(b, 34 + 4 * i);
    const auto pointer = little<std::int64_t>(b, 34 + 4 * sequences + 8 * i);
    if (size < 0 || pointer < 0 || static_cast<std::uint64_t>(pointer) != expect)
      throw DataError(origin + ": sequence " + std::to_string(i) + " has size " + std::to_string(size) +
                      " at byte " + std::to_string(pointer) + " of the .bin, but the sequences before it end at byte " +
                      std::to_string(expect) + " (the .idx disagrees with itself)");
    expect += static_cast<std::uint64_t>(size) * f.item_bytes;
    f.tokens += static_cast<std::uint64_t>(size);
  }
  if (expect != bin_bytes)
    throw DataError(origin + ": its sequences hold " + std::to_string(expect) + " bytes of ids but the .bin beside it "
                    "has " + std::to_string(bin_bytes) + " (the .idx disagrees with its .bin)");
  f.documents = sequences;
  return f;
}

TokenFile open_token_file(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) throw DataError(path + ": no such token file (" + ec.message() + ")");
  const auto stem = path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0 ? path.substr(0, path.size() - 4)
                                                                                     : std::string();
  if (stem.empty())
    throw DataError(path + ": a token file ends in .bin (nanoGPT's uint16 ids, or Megatron's beside its .idx)");
  TokenFile f;
  if (std::filesystem::exists(stem + ".idx")) {
    f = parse_megatron_idx(read_all(stem + ".idx"), bytes, stem + ".idx");
  } else {
    if (bytes % 2)
      throw DataError(path + ": " + std::to_string(bytes) + " bytes is not a whole number of uint16 ids (nanoGPT's "
                      "format; a Megatron .bin needs its .idx beside it)");
    f.tokens = bytes / 2;
  }
  f.bin = path;
  return f;
}

}  // namespace trident::formats
