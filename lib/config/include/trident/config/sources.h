// Where trident's datasets come from, for code that must stay torch-free
// (the config parser): the rest of the data component needs LibTorch.
#pragma once

namespace trident::data {

// The Debian package dataset-fashion-mnist installs the four IDX files here.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace trident::data
