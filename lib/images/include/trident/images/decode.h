// JPEG (libjpeg-turbo) and PNG (libpng) decoding to 8-bit pixels, with the
// decoder's own savings: a JPEG region is decoded alone (cropped scanlines,
// skipped rows) and at the smallest IDCT scale that still covers the size
// it will be resized to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trident/base/error.h"

namespace trident::images {

// An image that cannot be decoded: not a JPEG or PNG, truncated, corrupt.
// The message names `origin` (the file, or the shard and member).
using DecodeError = ComponentError<struct DecodeErrorTag, ErrorKind::kBadInput>;

// Pixels row by row, each pixel `channels` bytes (1 grey, 3 RGB).
struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<std::uint8_t> pixels;
  // Where it lies in the source image: pixel (y, x) starts at source pixel
  // (y0 + y * sy, x0 + x * sx) — a region, maybe decoded at a reduced scale.
  double y0 = 0, x0 = 0, sy = 1, sx = 1;
  std::uint8_t at(int y, int x, int c) const { return pixels[(static_cast<std::size_t>(y) * width + x) * channels + c]; }
};

enum class Format { kJpeg, kPng };

struct Header {
  Format format = Format::kJpeg;
  int height = 0, width = 0;
};

// The format (by its magic bytes) and size, from the header alone; an
// image over 178956970 pixels (PIL's decompression-bomb limit) is refused.
Header read_header(const std::uint8_t* bytes, std::size_t size, const std::string& origin);

// A rectangle of the image, in its own pixels.
struct Region {
  int top = 0, left = 0, height = 0, width = 0;
};

// The pixels of `region` in `channels` (1 or 3; colour converts to grey by
// the decoder's luma, grey repeats into RGB). `min_height`/`min_width` > 0
// let a JPEG decode at a reduced IDCT scale (n/8, n >= 1) so long as the
// region stays at least that large: the result is then smaller than the
// region. PNG always decodes whole and is cropped.
// Every warning of the decoder (a truncated or corrupt stream) is an error.
Image decode(const std::uint8_t* bytes, std::size_t size, const Region& region, int channels, int min_height,
             int min_width, const std::string& origin);

// Whole image, full scale.
Image decode(const std::uint8_t* bytes, std::size_t size, int channels, const std::string& origin);

// Encoders, for tests and benchmarks that make their own data: baseline
// JPEG at `quality` (1-100), and 8-bit PNG. Throw DecodeError (kFailure) on a
// library error.
std::string encode_jpeg(const Image& image, int quality);
std::string encode_png(const Image& image);

}  // namespace trident::images
