#include "trident/images/decode.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>

// libjpeg's header needs size_t and FILE declared first.
#include <jpeglib.h>
#include <png.h>

namespace trident::images {
namespace {

// Note [Decoder errors]
// ~~~~~~~~~~~~~~~~~~~~~
// libjpeg reports errors by calling error_exit, which must not return: it
// jumps back to the setjmp in decode_jpeg, whose frame holds no C++ object
// built after the setjmp. Warnings (level -1: "premature end of data",
// "corrupt data") jump too, so a truncated or damaged file is an error and
// never a silently grey image.
struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {0};
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_warn(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);
}

struct JpegResult {
  bool ok = false;
  char message[JMSG_LENGTH_MAX] = {0};
};

// The region's pixels into `out`, at scale num/8 (num from the minimum
// sizes); see Note [Decoder errors] for why this is C-like.
void decode_jpeg(const std::uint8_t* bytes, std::size_t size, const Region* region, int channels, int min_h,
                 int min_w, Image* out, JpegResult* result) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  std::vector<std::uint8_t> full;  // before the setjmp: a jump skips no destructor
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_fail;
  errors.mgr.emit_message = jpeg_warn;
  jpeg_create_decompress(&cinfo);
  if (setjmp(errors.jump)) {
    std::memcpy(result->message, errors.message, sizeof result->message);
    jpeg_destroy_decompress(&cinfo);
    return;
  }
  jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(result->message, sizeof result->message, "CMYK JPEG; convert it to RGB");
    jpeg_destroy_decompress(&cinfo);
    return;
  }
  cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  const int W = static_cast<int>(cinfo.image_width), H = static_cast<int>(cinfo.image_height);
  Region r = region ? *region : Region{0, 0, H, W};
  int num = 8;  // the smallest n/8 that keeps the region at least the minimum size
  while (num > 1 && (min_h > 0 || min_w > 0) && static_cast<long>(r.height) * (num - 1) >= 8L * min_h &&
         static_cast<long>(r.width) * (num - 1) >= 8L * min_w)
    --num;
  cinfo.scale_num = static_cast<unsigned>(num), cinfo.scale_denom = 8;
  cinfo.dct_method = JDCT_ISLOW;
  jpeg_start_decompress(&cinfo);
  const int sw = static_cast<int>(cinfo.output_width), sh = static_cast<int>(cinfo.output_height);
  // The region in scaled pixels, rounded outwards.
  const int top = static_cast<int>(static_cast<long>(r.top) * sh / H);
  const int bottom = std::min(sh, static_cast<int>((static_cast<long>(r.top + r.height) * sh + H - 1) / H));
  const int left = static_cast<int>(static_cast<long>(r.left) * sw / W);
  const int right = std::min(sw, static_cast<int>((static_cast<long>(r.left + r.width) * sw + W - 1) / W));
  JDIMENSION x = static_cast<JDIMENSION>(left), width = static_cast<JDIMENSION>(std::max(1, right - left));
  if (width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &x, &width);  // x moves down to an iMCU edge
  if (top > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(top));
  const int rows = std::max(1, bottom - top);
  const int stride = static_cast<int>(cinfo.output_width) * channels;
  full.resize(static_cast<std::size_t>(rows) * stride);
  for (int y = 0; y < rows; ++y) {
    JSAMPROW row = full.data() + static_cast<std::size_t>(y) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_abort_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  // Keep [left, right) of the iMCU-aligned columns.
  const int skip = left - static_cast<int>(x), keep = std::max(1, right - left);
  out->height = rows, out->width = keep, out->channels = channels;
  out->sy = static_cast<double>(H) / sh, out->sx = static_cast<double>(W) / sw;
  out->y0 = top * out->sy, out->x0 = left * out->sx;
  out->pixels.resize(static_cast<std::size_t>(rows) * keep * channels);
  for (int y = 0; y < rows; ++y)
    std::memcpy(out->pixels.data() + static_cast<std::size_t>(y) * keep * channels,
                full.data() + static_cast<std::size_t>(y) * stride + static_cast<std::size_t>(skip) * channels,
                static_cast<std::size_t>(keep) * channels);
  result->ok = true;
}

bool is_png(const std::uint8_t* b, std::size_t n) { return n >= 8 && std::memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0; }
bool is_jpeg(const std::uint8_t* b, std::size_t n) { return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }

Image decode_png(const std::uint8_t* bytes, std::size_t size, int channels, const std::string& origin) {
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&image, bytes, size))
    throw DecodeError(origin + ": not a readable PNG (" + image.message + ")");
  image.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  Image out;
  out.height = static_cast<int>(image.height), out.width = static_cast<int>(image.width), out.channels = channels;
  out.pixels.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.pixels.data(), 0, nullptr)) {
    const std::string message = image.message;
    png_image_free(&image);
    throw DecodeError(origin + ": the PNG cannot be decoded (" + message + ")");
  }
  if (image.warning_or_error & PNG_IMAGE_ERROR) throw DecodeError(origin + ": the PNG cannot be decoded (" + image.message + ")");
  return out;
}

Image crop(const Image& in, const Region& r) {
  Image out;
  out.height = r.height, out.width = r.width, out.channels = in.channels, out.y0 = r.top, out.x0 = r.left;
  out.pixels.resize(static_cast<std::size_t>(r.height) * r.width * in.channels);
  for (int y = 0; y < r.height; ++y)
    std::memcpy(out.pixels.data() + static_cast<std::size_t>(y) * r.width * in.channels,
                in.pixels.data() + (static_cast<std::size_t>(r.top + y) * in.width + r.left) * in.channels,
                static_cast<std::size_t>(r.width) * in.channels);
  return out;
}

}  // namespace

Header read_header(const std::uint8_t* bytes, std::size_t size, const std::string& origin) {
  Header h;
  if (is_png(bytes, size)) {
    if (size < 24 || std::memcmp(bytes + 12, "IHDR", 4) != 0) throw DecodeError(origin + ": a PNG without its IHDR header");
    auto be = [&](std::size_t at) {
      return static_cast<int>((std::uint32_t{bytes[at]} << 24) | (std::uint32_t{bytes[at + 1]} << 16) |
                              (std::uint32_t{bytes[at + 2]} << 8) | bytes[at + 3]);
    };
    h.format = Format::kPng, h.width = be(16), h.height = be(20);
  } else if (is_jpeg(bytes, size)) {
    jpeg_decompress_struct cinfo;
    JpegErrors errors;
    cinfo.err = jpeg_std_error(&errors.mgr);
    errors.mgr.error_exit = jpeg_fail;
    errors.mgr.emit_message = jpeg_warn;
    jpeg_create_decompress(&cinfo);
    if (setjmp(errors.jump)) {
      jpeg_destroy_decompress(&cinfo);
      throw DecodeError(origin + ": the JPEG header cannot be read (" + std::string(errors.message) + ")");
    }
    jpeg_mem_src(&cinfo, bytes, static_cast<unsigned long>(size));
    jpeg_read_header(&cinfo, TRUE);
    h.format = Format::kJpeg, h.width = static_cast<int>(cinfo.image_width), h.height = static_cast<int>(cinfo.image_height);
    jpeg_destroy_decompress(&cinfo);
  } else {
    throw DecodeError(origin + ": neither a JPEG nor a PNG (by its first bytes)");
  }
  if (h.width <= 0 || h.height <= 0 || h.width > 65535 || h.height > 65535)
    throw DecodeError(origin + ": image size " + std::to_string(h.width) + "x" + std::to_string(h.height) +
                      " is outside 1..65535");
  // PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS): a header may
  // promise more pixels than any training image has, to exhaust memory.
  constexpr long kMostPixels = 178956970;
  if (static_cast<long>(h.width) * h.height > kMostPixels)
    throw DecodeError(origin + ": image size " + std::to_string(h.width) + "x" + std::to_string(h.height) + " is over " +
                      std::to_string(kMostPixels) + " pixels (PIL's limit for a decompression bomb)");
  return h;
}

Image decode(const std::uint8_t* bytes, std::size_t size, const Region& region, int channels, int min_height,
             int min_width, const std::string& origin) {
  if (channels != 1 && channels != 3) throw DecodeError(origin + ": " + std::to_string(channels) + " channels; 1 or 3");
  const auto h = read_header(bytes, size, origin);
  if (region.top < 0 || region.left < 0 || region.height < 1 || region.width < 1 ||
      region.top + region.height > h.height || region.left + region.width > h.width)
    throw DecodeError(origin + ": region outside the " + std::to_string(h.width) + "x" + std::to_string(h.height) +
                      " image", ErrorKind::kFailure);
  if (h.format == Format::kPng) {
    const auto whole = decode_png(bytes, size, channels, origin);
    return region.height == whole.height && region.width == whole.width ? whole : crop(whole, region);
  }
  Image out;
  JpegResult result;
  decode_jpeg(bytes, size, &region, channels, min_height, min_width, &out, &result);
  if (!result.ok) throw DecodeError(origin + ": the JPEG cannot be decoded (" + std::string(result.message) + ")");
  return out;
}

Image decode(const std::uint8_t* bytes, std::size_t size, int channels, const std::string& origin) {
  const auto h = read_header(bytes, size, origin);
  return decode(bytes, size, Region{0, 0, h.height, h.width}, channels, 0, 0, origin);
}

std::string encode_jpeg(const Image& image, int quality) {
  jpeg_compress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = jpeg_fail;
  unsigned char* buffer = nullptr;
  unsigned long length = 0;
  jpeg_create_compress(&cinfo);
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    throw DecodeError("JPEG encoder: " + std::string(errors.message), ErrorKind::kFailure);
  }
  jpeg_mem_dest(&cinfo, &buffer, &length);
  cinfo.image_width = static_cast<JDIMENSION>(image.width), cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = image.channels;
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const int stride = image.width * image.channels;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<std::uint8_t*>(image.pixels.data()) + static_cast<std::size_t>(cinfo.next_scanline) * stride;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), length);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

std::string encode_png(const Image& image) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width), png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr))
    throw DecodeError("PNG encoder: " + std::string(png.message), ErrorKind::kFailure);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, image.pixels.data(), 0, nullptr))
    throw DecodeError("PNG encoder: " + std::string(png.message), ErrorKind::kFailure);
  out.resize(size);
  return out;
}

}  // namespace trident::images
