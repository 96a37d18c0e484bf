// Which BLAS LibTorch runs on, which kernel it runs, and the choice of that
// kernel when a process starts. Without OpenBLAS (Debian package
// libopenblas0-pthread), libblas.so.3 is the reference BLAS, about 30x slower.
//
// Note [BLAS kernel]
// ~~~~~~~~~~~~~~~~~~
// Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels from cpuid when
// it loads. On a CPU it does not know it falls back to generic SSE3 kernels
// ("Prescott"): on an AVX-512 Xeon that made the mlp and transformer steps
// 3x slower than with the kernels the CPU supports (issue 32). The kernel can
// be chosen only before the library loads, by OPENBLAS_CORETYPE, so the choice
// is made at process start (process::prepare_process) and applied by the
// re-execution that Note [CPU process settings] already pays:
// - A OPENBLAS_CORETYPE that the user or the machine set is never replaced;
//   its products are checked in-process, and a kernel that computes them wrong
//   stops the command (exit 1) naming the variable.
// - Otherwise, when the detected kernel is a fallback (process/blas_kernel.h:
//   below what the CPU offers for float32), the best family the CPU supports
//   is tried in a child process (this program again, TRIDENT_BLAS_CHECK=1), so
//   that a kernel that crashes (an illegal instruction) costs nothing but the
//   child. The child computes products of the shapes training uses (Linear
//   forward and both gradients, odd edges, a blocked size, a matrix-vector
//   product) and compares them with a naive double-precision product: each
//   element within 2·k·u·(|A|·|B|) + u·|C| (u = 2^-24, k the inner size), the
//   float32 rounding bound with a factor 2 to spare. Only a kernel that passes
//   is kept; a refused one is named on stderr and the detected kernel stays.
// - The decision travels to child processes (launcher workers, calibration
//   workers) in TRIDENT_BLAS_CHOICE, so they neither check nor decide again.
// `trident version` and the run's first line say what runs, e.g.
// "OpenBLAS 0.3.21, kernel Cooperlake (detected Prescott; checked)".
#pragma once

#include <string>

namespace trident::process {

// The resolved path of the loaded libblas (empty when none is mapped).
std::string active_blas();
// A one-line warning when the active BLAS is not OpenBLAS, else empty.
std::string blas_warning();

// What LibTorch's products run on in this process.
struct BlasInUse {
  std::string library;  // "OpenBLAS 0.3.21", "MKL (inside LibTorch)", or libblas's path
  std::string kernel;   // OpenBLAS's kernel family; empty for other libraries
  std::string how;      // how that kernel came to run, e.g. "detected Prescott; checked"
  // "MKL" where LibTorch's sgemm_ is the MKL linked into a wheel's LibTorch
  // rather than OpenBLAS (Note [One LibTorch]): OpenBLAS then serves only
  // trident's small batched products (Note [Small batched products]).
  std::string libtorch_products;
  // "OpenBLAS 0.3.21, kernel Cooperlake (detected Prescott; checked)", with
  // "; LibTorch's products: MKL" after it where that holds.
  std::string describe() const;
};
BlasInUse blas_in_use();

// Checks LibTorch's float32 products against a naive double-precision
// product (the bound of Note [BLAS kernel]). `ok` false names the first
// product out of bounds in `worst`.
struct ProductCheck {
  bool ok = true;
  std::string worst;
  double ratio = 0;  // the largest |error| / bound over every element checked
};
ProductCheck check_products();

// The process-start half of Note [BLAS kernel]: in a check child
// (TRIDENT_BLAS_CHECK set) prints the verdict and exits; otherwise decides
// the kernel and puts the decision into the environment. Returns true when
// OPENBLAS_CORETYPE changed, so that this process must re-execute to run it.
// Throws Failure when a kernel set outside trident computes wrong products.
bool choose_blas_kernel(char** argv);

}  // namespace trident::process
