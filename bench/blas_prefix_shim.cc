// For bench/run_blas.sh only: exports the two BLAS entry points LibTorch's
// float32 training calls (sgemm_, sgemv_) and forwards them to a current
// OpenBLAS built with prefixed symbols (the scipy-openblas32 wheel's
// scipy_sgemm_, scipy_sgemv_), so that LibTorch 1.13 can be timed on it
// without replacing the system's BLAS. Preloaded with LD_PRELOAD.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {

void* library() {
  static void* handle = [] {
    const char* path = std::getenv("BLAS_PREFIX_SHIM_LIBRARY");
    void* h = path ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!h) std::fprintf(stderr, "blas_prefix_shim: cannot open BLAS_PREFIX_SHIM_LIBRARY=%s\n", path ? path : "");
    return h;
  }();
  return handle;
}

template <class F>
F prefixed(const char* name) {
  auto f = reinterpret_cast<F>(::dlsym(library(), name));
  if (!f) std::abort();
  return f;
}

}  // namespace

extern "C" {

void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  static auto f = prefixed<decltype(&sgemm_)>("scipy_sgemm_");
  f(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemv_(const char* t, const int* m, const int* n, const float* alpha, const float* a, const int* lda,
            const float* x, const int* incx, const float* beta, float* y, const int* incy) {
  static auto f = prefixed<decltype(&sgemv_)>("scipy_sgemv_");
  f(t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

}  // extern "C"
