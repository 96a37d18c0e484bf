// Where trident's datasets live by default: the config's defaults (torch-free)
// and the data library's loaders read the same path.
#pragma once

namespace trident::formats {

// The Debian package dataset-fashion-mnist installs the four IDX files here.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

}  // namespace trident::formats
