// Which BLAS LibTorch is running on. Without OpenBLAS (Debian package
// libopenblas0-pthread), libblas.so.3 is the reference BLAS, about 30x slower.
#pragma once

#include <string>

namespace trident::runtime {

// The resolved path of the loaded libblas (empty when none is mapped).
std::string active_blas();
// A one-line warning when the active BLAS is not OpenBLAS, else empty.
std::string blas_warning();

// Sets torch's intra-op threads and, when OpenBLAS is loaded, its own thread
// pool too: Debian's LibTorch does not forward torch::set_num_threads to
// OpenBLAS, whose extra threads then spin against torch's (measured: the
// mlp step ran 2.3x slower with threads = 1 on 2 cores).
void set_threads(int threads);

}  // namespace trident::runtime
