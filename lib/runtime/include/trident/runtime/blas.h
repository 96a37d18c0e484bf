// Which BLAS LibTorch is running on. Without OpenBLAS (Debian package
// libopenblas0-pthread), libblas.so.3 is the reference BLAS, about 30x slower.
#pragma once

#include <string>

namespace trident::runtime {

// The resolved path of the loaded libblas (empty when none is mapped).
std::string active_blas();
// A one-line warning when the active BLAS is not OpenBLAS, else empty.
std::string blas_warning();


}  // namespace trident::runtime
