#include "trident/images/transforms.h"

#include <algorithm>
#include <cmath>

namespace trident::images {
namespace {

// Python's round(): halves to even (the default rounding mode).
int round_even(double v) { return static_cast<int>(std::nearbyint(v)); }

// An entry's [H, W] from S or [H, W].
std::pair<int, int> size_of(const nlohmann::json& v, const std::string& where) {
  auto one = [&](const nlohmann::json& n) {
    if (!n.is_number_integer() || n.get<std::int64_t>() < 1 || n.get<std::int64_t>() > 65535)
      throw TransformError(where + " = " + v.dump() + ": a size is an integer from 1 to 65535, or [height, width]");
    return static_cast<int>(n.get<std::int64_t>());
  };
  if (v.is_array() && v.size() == 2) return {one(v[0]), one(v[1])};
  const int s = one(v);
  return {s, s};
}

std::pair<double, double> range_of(const nlohmann::json& v, double lo_bound, const std::string& where) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number() || v[0].get<double>() <= lo_bound ||
      v[1].get<double>() < v[0].get<double>())
    throw TransformError(where + " = " + v.dump() + ": a range [low, high] with " + std::to_string(lo_bound).substr(0, 3) +
                         " < low <= high");
  return {v[0].get<double>(), v[1].get<double>()};
}

std::vector<double> numbers(const nlohmann::json& v, bool positive, const std::string& where) {
  std::vector<double> out;
  if (!v.is_array() || v.empty() || v.size() > 4)
    throw TransformError(where + " = " + v.dump() + ": one number per channel, e.g. [0.5]");
  for (const auto& n : v) {
    if (!n.is_number() || (positive && n.get<double>() <= 0))
      throw TransformError(where + " = " + v.dump() + ": numbers" + (positive ? " above 0" : ""));
    out.push_back(n.get<double>());
  }
  return out;
}

void check_keys(const nlohmann::json& v, std::initializer_list<const char*> allowed, const std::string& where) {
  if (!v.is_object()) return;
  for (const auto& [k, _] : v.items()) {
    bool ok = false;
    std::string names;
    for (const char* a : allowed) ok = ok || k == a, names += (names.empty() ? "" : ", ") + std::string(a);
    if (!ok) throw TransformError(where + "." + k + ": unknown setting; allowed: " + names);
  }
}

// PIL's bilinear coefficients for output positions over [start, start +
// length) of an axis of `in` pixels (precompute_coeffs in its Resample.c):
// a triangle filter widened by the shrink factor, clipped to the axis.
struct Taps {
  std::vector<int> first, count;
  std::vector<float> weights;  // `width` per output
  int width = 0;
};

Taps taps(int in, double start, double length, int out) {
  const double scale = length / out, filterscale = std::max(scale, 1.0), support = filterscale;
  Taps t;
  t.width = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out), t.count.resize(out), t.weights.assign(static_cast<std::size_t>(out) * t.width, 0.f);
  for (int o = 0; o < out; ++o) {
    const double center = start + (o + 0.5) * scale;
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int hi = std::min(static_cast<int>(center + support + 0.5), in);
    double total = 0;
    std::vector<double> w;
    for (int x = lo; x < hi; ++x) {
      const double d = std::abs((x - center + 0.5) / filterscale);
      w.push_back(d < 1 ? 1 - d : 0), total += w.back();
    }
    t.first[o] = lo, t.count[o] = std::min<int>(static_cast<int>(w.size()), t.width);
    for (int k = 0; k < t.count[o]; ++k)
      t.weights[static_cast<std::size_t>(o) * t.width + k] = static_cast<float>(total > 0 ? w[k] / total : 0);
  }
  return t;
}

}  // namespace

Transforms parse_transforms(const nlohmann::json& list, const std::string& key) {
  if (!list.is_array()) throw TransformError(key + " = " + list.dump() + ": a list, e.g. [random_resized_crop: 224, horizontal_flip, normalize: imagenet]");
  Transforms t;
  std::vector<std::string> geometry;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto where = key + "[" + std::to_string(i) + "]";
    std::string name;
    nlohmann::json v;
    if (list[i].is_string()) {
      name = list[i].get<std::string>();
    } else if (list[i].is_object() && list[i].size() == 1) {
      name = list[i].begin().key(), v = list[i].begin().value();
    } else {
      throw TransformError(where + " = " + list[i].dump() + ": an entry is a name, or name: value");
    }
    const auto at = where + "." + name;
    if (name == "random_resized_crop") {
      check_keys(v, {"size", "scale", "ratio"}, at);
      const auto& size = v.is_object() ? v.value("size", nlohmann::json()) : v;
      if (size.is_null()) throw TransformError(at + ": needs a size, e.g. random_resized_crop: 224");
      std::tie(t.out_height, t.out_width) = size_of(size, at + (v.is_object() ? ".size" : ""));
      if (v.is_object() && v.contains("scale")) std::tie(t.scale_lo, t.scale_hi) = range_of(v["scale"], 0, at + ".scale");
      if (t.scale_hi > 1) throw TransformError(at + ".scale = " + v["scale"].dump() + ": the crop's share of the area is at most 1");
      if (v.is_object() && v.contains("ratio")) std::tie(t.ratio_lo, t.ratio_hi) = range_of(v["ratio"], 0, at + ".ratio");
      geometry.push_back(name);
    } else if (name == "horizontal_flip") {
      check_keys(v, {"p"}, at);
      t.flip_p = 0.5;
      if (v.is_object() && v.contains("p")) {
        if (!v["p"].is_number() || v["p"].get<double>() < 0 || v["p"].get<double>() > 1)
          throw TransformError(at + ".p = " + v["p"].dump() + ": a probability from 0 to 1");
        t.flip_p = v["p"].get<double>();
      } else if (!v.is_null() && !v.is_object()) {
        throw TransformError(at + " = " + v.dump() + ": write horizontal_flip or horizontal_flip: {p: 0.5}");
      }
    } else if (name == "resize") {
      if (v.is_array()) {
        std::tie(t.resize_height, t.resize_width) = size_of(v, at);
      } else {
        t.resize_short = size_of(v, at).first;
      }
      geometry.push_back(name);
    } else if (name == "center_crop") {
      std::tie(t.out_height, t.out_width) = size_of(v, at);
      geometry.push_back(name);
    } else if (name == "normalize") {
      if (v == "imagenet") {
        t.mean = {0.485, 0.456, 0.406}, t.std = {0.229, 0.224, 0.225};
      } else if (v.is_object()) {
        check_keys(v, {"mean", "std"}, at);
        if (!v.contains("mean") || !v.contains("std")) throw TransformError(at + ": needs mean and std, or write normalize: imagenet");
        t.mean = numbers(v["mean"], false, at + ".mean"), t.std = numbers(v["std"], true, at + ".std");
        if (t.mean.size() != t.std.size())
          throw TransformError(at + ": mean has " + std::to_string(t.mean.size()) + " numbers and std " + std::to_string(t.std.size()));
      } else {
        throw TransformError(at + " = " + v.dump() + ": imagenet, or {mean: [...], std: [...]}");
      }
    } else {
      throw TransformError(where + " = " + name + ": unknown transform; allowed: random_resized_crop, horizontal_flip, "
                           "resize, center_crop, normalize");
    }
  }
  const auto seq = [&] {
    std::string s;
    for (const auto& g : geometry) s += (s.empty() ? "" : ", ") + g;
    return s;
  }();
  using G = Transforms::Geometry;
  if (geometry.empty()) t.geometry = G::kNone;
  else if (seq == "random_resized_crop") t.geometry = G::kRandomResizedCrop;
  else if (seq == "resize") t.geometry = G::kResize;
  else if (seq == "center_crop") t.geometry = G::kCenterCrop;
  else if (seq == "resize, center_crop") t.geometry = G::kResizeCenterCrop;
  else
    throw TransformError(key + ": crops and resizes in the order " + seq + "; allowed: random_resized_crop, or resize "
                         "then center_crop, or either alone");
  if (t.geometry == G::kResize) t.out_height = t.resize_height, t.out_width = t.resize_width;
  return t;
}

Region random_resized_crop(int height, int width, const Transforms& t, KeyedRandom& random) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(t.ratio_lo), log_hi = std::log(t.ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * random.uniform(t.scale_lo, t.scale_hi);
    const double aspect = std::exp(random.uniform(log_lo, log_hi));
    const int w = round_even(std::sqrt(target * aspect)), h = round_even(std::sqrt(target / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(random.below(height - h + 1));
      const int left = static_cast<int>(random.below(width - w + 1));
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / height;  // the central crop
  int w = width, h = height;
  if (in_ratio < t.ratio_lo) h = round_even(w / t.ratio_lo);
  else if (in_ratio > t.ratio_hi) w = round_even(h * t.ratio_hi);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

std::vector<float> resize_box(const Image& in, double top, double left, double box_h, double box_w, int out_h,
                              int out_w, bool flip) {
  const int C = in.channels;
  const auto th = taps(in.height, top, box_h, out_h), tw = taps(in.width, left, box_w, out_w);
  const int y0 = th.first.front(), y1 = th.first.back() + th.count.back();
  // Horizontal pass over the rows the vertical pass reads: [y1 - y0][out_w][C].
  std::vector<float> rows(static_cast<std::size_t>(y1 - y0) * out_w * C);
  for (int y = y0; y < y1; ++y) {
    const std::uint8_t* src = in.pixels.data() + static_cast<std::size_t>(y) * in.width * C;
    float* dst = rows.data() + static_cast<std::size_t>(y - y0) * out_w * C;
    for (int o = 0; o < out_w; ++o) {
      const float* w = tw.weights.data() + static_cast<std::size_t>(o) * tw.width;
      const std::uint8_t* p = src + static_cast<std::size_t>(tw.first[o]) * C;
      for (int c = 0; c < C; ++c) {
        float s = 0;
        for (int k = 0; k < tw.count[o]; ++k) s += w[k] * p[k * C + c];
        dst[o * C + c] = s;
      }
    }
  }
  std::vector<float> out(static_cast<std::size_t>(C) * out_h * out_w);
  std::vector<float> line(static_cast<std::size_t>(out_w) * C);
  for (int o = 0; o < out_h; ++o) {
    std::fill(line.begin(), line.end(), 0.f);
    const float* w = th.weights.data() + static_cast<std::size_t>(o) * th.width;
    for (int k = 0; k < th.count[o]; ++k) {
      const float* src = rows.data() + static_cast<std::size_t>(th.first[o] + k - y0) * out_w * C;
      for (int i = 0; i < out_w * C; ++i) line[i] += w[k] * src[i];
    }
    for (int x = 0; x < out_w; ++x) {
      const int from = flip ? out_w - 1 - x : x;
      for (int c = 0; c < C; ++c)
        out[(static_cast<std::size_t>(c) * out_h + o) * out_w + x] = line[static_cast<std::size_t>(from) * C + c];
    }
  }
  return out;
}

void apply(const Transforms& t, const std::uint8_t* bytes, std::size_t size, const SampleKey& key, int channels,
           int height, int width, float* out, const std::string& origin) {
  using G = Transforms::Geometry;
  const auto header = read_header(bytes, size, origin);
  const int H = header.height, W = header.width;
  KeyedRandom random({key.seed, static_cast<std::uint64_t>(key.epoch), static_cast<std::uint64_t>(key.id)});
  Region region{0, 0, H, W};                             // what the decoder reads
  double top = 0, left = 0, box_h = H, box_w = W;        // what is resized, in the image's pixels
  int out_h = H, out_w = W;
  int resized_h = H, resized_w = W;
  if (t.geometry == G::kResize || t.geometry == G::kResizeCenterCrop) {
    if (t.resize_short) {
      const bool tall = W <= H;
      const int short_side = tall ? W : H, long_side = tall ? H : W;
      const int other = static_cast<int>(static_cast<double>(t.resize_short) * long_side / short_side);
      resized_h = tall ? other : t.resize_short, resized_w = tall ? t.resize_short : other;
    } else {
      resized_h = t.resize_height, resized_w = t.resize_width;
    }
    out_h = resized_h, out_w = resized_w;
  }
  if (t.geometry == G::kRandomResizedCrop) {
    region = random_resized_crop(H, W, t, random);
    top = region.top, left = region.left, box_h = region.height, box_w = region.width;
    out_h = t.out_height, out_w = t.out_width;
  } else if (t.geometry == G::kCenterCrop || t.geometry == G::kResizeCenterCrop) {
    if (t.out_height > resized_h || t.out_width > resized_w)
      throw DecodeError(origin + ": center_crop " + std::to_string(t.out_height) + "x" + std::to_string(t.out_width) +
                        " is larger than the image (" + std::to_string(resized_h) + "x" + std::to_string(resized_w) +
                        " after resize); resize it first");
    const int ct = round_even((resized_h - t.out_height) / 2.0), cl = round_even((resized_w - t.out_width) / 2.0);
    const double sy = static_cast<double>(H) / resized_h, sx = static_cast<double>(W) / resized_w;
    top = ct * sy, left = cl * sx, box_h = t.out_height * sy, box_w = t.out_width * sx;
    out_h = t.out_height, out_w = t.out_width;
    if (t.geometry == G::kCenterCrop) region = {ct, cl, t.out_height, t.out_width};
  }
  const bool flip = t.flip_p > 0 && random.uniform(0, 1) < t.flip_p;
  if (out_h != height || out_w != width)
    throw DecodeError(origin + ": the image is " + std::to_string(out_h) + "x" + std::to_string(out_w) +
                      " after the transforms but the model takes " + std::to_string(height) + "x" +
                      std::to_string(width) + "; add a resize or crop to data.transforms");
  // The decoder may shrink by n/8 while the region stays at least the output.
  const auto image = decode(bytes, size, region, channels, static_cast<int>(std::ceil(out_h * region.height / box_h)),
                            static_cast<int>(std::ceil(out_w * region.width / box_w)), origin);
  const auto pixels = resize_box(image, (top - image.y0) / image.sy, (left - image.x0) / image.sx, box_h / image.sy,
                                 box_w / image.sx, out_h, out_w, flip);
  const std::size_t plane = static_cast<std::size_t>(out_h) * out_w;
  for (int c = 0; c < channels; ++c) {
    const double m = t.mean.empty() ? 0 : t.mean[t.mean.size() == 1 ? 0 : c];
    const double s = t.std.empty() ? 1 : t.std[t.std.size() == 1 ? 0 : c];
    const float a = static_cast<float>(1.0 / (255.0 * s)), b = static_cast<float>(-m / s);
    const float* src = pixels.data() + c * plane;
    float* dst = out + c * plane;
    for (std::size_t i = 0; i < plane; ++i) dst[i] = src[i] * a + b;
  }
}

}  // namespace trident::images
