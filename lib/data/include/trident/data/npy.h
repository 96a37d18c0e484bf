// NumPy `.npy` arrays (format versions 1-3), the user's own data
// (`data: {name: npy, train: DIR, test: DIR}`, one FIELD.npy per input
// field). Debian packages no maintained C++ reader, so this one is small and
// strict: C order, little-endian float32 ('<f4') or int64 ('<i8') only, the
// data exactly as long as the header's shape says. Anything else is a
// DataError naming the file and what was found.
#pragma once

#include <set>
#include <string>

#include <torch/torch.h>

#include "trident/data/dataset.h"

namespace trident::data {

// The array in `bytes` (a whole .npy file); `origin` names it in errors.
torch::Tensor parse_npy(const std::string& bytes, const std::string& origin);
torch::Tensor read_npy(const std::string& path);

// DIR/FIELD.npy for each field in `fields` ("label" included: int64 class
// ids, or float32 targets for an mse loss), for both splits. Every field of
// a split has the same length.
Splits load_npy(const std::string& train_dir, const std::string& test_dir, const std::set<std::string>& fields);

}  // namespace trident::data
