// A stand-in for the OpenBLAS of issue 32, preloaded (LD_PRELOAD) by
// blas_test.sh in front of the real one, so that the kernel choice of
// See Note [BLAS kernel] (process/blas.h) can be tested on any x86-64 machine:
// - openblas_get_corename() says "Prescott" while OPENBLAS_CORETYPE is unset,
//   as Debian's OpenBLAS 0.3.21 did on a CPU it did not know; with the
//   variable set it names the kernel that really runs.
// - With TRIDENT_TEST_BLAS_STANDIN=wrong, a kernel forced by OPENBLAS_CORETYPE
//   computes wrong products: sgemm_ and sgemv_ add 1 to their first element.
// Every product is still computed by the real OpenBLAS.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

bool forced_wrong() {
  const char* mode = std::getenv("TRIDENT_TEST_BLAS_STANDIN");
  return std::getenv("OPENBLAS_CORETYPE") && mode && std::strcmp(mode, "wrong") == 0;
}

}  // namespace

extern "C" {

const char* openblas_get_corename() {
  if (!std::getenv("OPENBLAS_CORETYPE")) return "Prescott";
  static auto real = next<const char* (*)()>("openblas_get_corename");
  return real ? real() : "unknown";
}

void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  static auto real = next<decltype(&sgemm_)>("sgemm_");
  real(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (forced_wrong() && *m > 0 && *n > 0) c[0] += 1.0f;
}

void sgemv_(const char* t, const int* m, const int* n, const float* alpha, const float* a, const int* lda,
            const float* x, const int* incx, const float* beta, float* y, const int* incy) {
  static auto real = next<decltype(&sgemv_)>("sgemv_");
  real(t, m, n, alpha, a, lda, x, incx, beta, y, incy);
  if (forced_wrong() && *m > 0 && *n > 0) y[0] += 1.0f;
}

}  // extern "C"
