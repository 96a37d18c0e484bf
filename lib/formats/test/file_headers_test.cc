// The torch-free header checks on their own: what a good header yields and
// the DataError a bad one raises (data's tests read whole files through them).
#include "trident/formats/file_headers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace trident::formats {
namespace {

// numpy.save's format 1.0: magic, version, a little-endian header length, the dict.
std::string npy(const std::string& dict, std::size_t data_bytes) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + '\x01' + '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(data_bytes, '\0');
}

std::vector<std::uint8_t> idx(std::uint32_t magic, std::vector<std::uint32_t> dims, std::size_t data_bytes) {
  std::vector<std::uint8_t> out;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<std::uint8_t>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  out.resize(out.size() + data_bytes);
  return out;
}

TEST(NpyHeader, GivesShapeOffsetAndBytesOfAGoodFile) {
  const auto bytes = npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }", 60);
  const auto h = parse_npy_header(bytes, "x.npy");
  EXPECT_EQ(h.descr, "<f4");
  EXPECT_EQ(h.shape, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(h.data_offset, bytes.size() - 60);
  EXPECT_EQ(h.data_bytes, 60u);
}

TEST(NpyHeader, RefusesADtypeOrderOrLengthItCannotRead) {
  EXPECT_THROW(parse_npy_header(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 24), "x.npy"),
               DataError);
  EXPECT_THROW(parse_npy_header(npy("{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }", 24), "x.npy"),
               DataError);
  EXPECT_THROW(parse_npy_header(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 23), "x.npy"),
               DataError);
  EXPECT_THROW(parse_npy_header(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8), "x.npy"),
               DataError);
  EXPECT_THROW(parse_npy_header("not numpy", "x.npy"), DataError);
}

TEST(Idx, ReadsTheFirstDimensionAndChecksTheRest) {
  EXPECT_EQ(check_idx(idx(2051, {4, 28, 28}, 4 * 28 * 28), 2051, {0, 28, 28}, "images"),
            (std::vector<std::int64_t>{4, 28, 28}));
  EXPECT_THROW(check_idx(idx(2049, {4, 28, 28}, 4 * 28 * 28), 2051, {0, 28, 28}, "images"), DataError);
  EXPECT_THROW(check_idx(idx(2051, {4, 28, 27}, 4 * 28 * 27), 2051, {0, 28, 28}, "images"), DataError);
  EXPECT_THROW(check_idx(idx(2051, {4, 28, 28}, 4 * 28 * 28 - 1), 2051, {0, 28, 28}, "images"), DataError);
}

}  // namespace
}  // namespace trident::formats
