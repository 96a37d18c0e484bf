// Image transforms as a config list (`data.transforms`, `data.eval_transforms`),
// applied to one encoded image at a time: decode, crop, resize, flip,
// normalise, into float32 [C, H, W]. Every random choice is drawn from
// (seed, epoch, sample id) alone (Note [Keyed augmentation]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trident/base/keyed_random.h"
#include "trident/images/decode.h"

namespace trident::images {

// A transform list that cannot be read: names the key, the entry and what
// is allowed.
using TransformError = ComponentError<struct TransformErrorTag, ErrorKind::kBadInput>;

// Note [Keyed augmentation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// A sample's random crop and flip come from a counter-based generator keyed
// by (seed, epoch, sample id) — splitmix64 over the three, then its stream —
// never by a thread, worker, rank, stage or plan. So the same global batch
// holds the same bytes whatever decodes it, and a resumed run repeats the
// uninterrupted one's augmentation. Uniform draws take the top 53 bits
// (base/keyed_random.h).
using trident::KeyedRandom;  // keyed by {seed, epoch, sample id}

// The transforms torchvision users know, with its semantics:
//   random_resized_crop: {size: S or [H, W], scale: [0.08, 1], ratio: [3/4, 4/3]}
//       RandomResizedCrop's get_params (10 tries, then the central crop), then
//       a bilinear resize of the crop to the size
//   horizontal_flip: {p: 0.5}
//   resize: S (the shorter side to S, the other int(S * long / short)) or [H, W]
//   center_crop: S or [H, W]  (after resize; torchvision's rounding)
//   normalize: imagenet | {mean: [...], std: [...]} (one per channel), after
//       pixels / 255 (ToTensor); without it the output is pixels / 255
// Resizing is PIL's bilinear filter (antialiased when shrinking), over the
// crop's exact box. An entry is `name` alone (its defaults) or
// `name: value`. Geometry takes one of: random_resized_crop; resize then
// center_crop; resize; center_crop; nothing (the image's own size, which
// must be the model's). Flip and normalize may stand anywhere.
struct Transforms {
  enum class Geometry { kNone, kRandomResizedCrop, kResize, kCenterCrop, kResizeCenterCrop };
  Geometry geometry = Geometry::kNone;
  int out_height = 0, out_width = 0;  // of the crop or resize (0: the image's)
  int resize_short = 0;               // resize S: the shorter side
  int resize_height = 0, resize_width = 0;  // resize [H, W]
  double scale_lo = 0.08, scale_hi = 1.0, ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;
  double flip_p = 0;
  std::vector<double> mean, std;  // empty: pixels / 255
  bool random() const { return geometry == Geometry::kRandomResizedCrop || flip_p > 0; }
};

// Reads a list; `key` names it in errors ("data.transforms").
Transforms parse_transforms(const nlohmann::json& list, const std::string& key);

// The crop of an H x W image (torchvision's RandomResizedCrop.get_params).
Region random_resized_crop(int height, int width, const Transforms& t, KeyedRandom& random);

struct SampleKey {
  std::uint64_t seed = 0;
  std::int64_t epoch = 0, id = 0;
};

// Decodes `bytes` and applies `t` into `out` (float32 [channels, height,
// width], the model's input); throws DecodeError naming `origin` when the
// image cannot be decoded or its size after the transforms is not
// height x width.
void apply(const Transforms& t, const std::uint8_t* bytes, std::size_t size, const SampleKey& key, int channels,
           int height, int width, float* out, const std::string& origin);

// The bilinear resize of box [top, top + box_h) x [left, left + box_w) of
// `in` (fractional, in its pixels) to out_h x out_w, as floats 0..255 in
// [C, H, W], mirrored when `flip`.
std::vector<float> resize_box(const Image& in, double top, double left, double box_h, double box_w, int out_h,
                              int out_w, bool flip);

}  // namespace trident::images
