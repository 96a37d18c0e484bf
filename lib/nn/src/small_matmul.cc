#include "trident/nn/small_matmul.h"

#include <ATen/Parallel.h>

#include <algorithm>

// The Fortran BLAS interface (column-major), which every BLAS exports; the
// one LibTorch already loads (OpenBLAS, through libblas.so.3) serves it.
extern "C" void sgemm_(const char* trans_a, const char* trans_b, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);

namespace trident::nn {

namespace {

// out[p] = op(a[p]) · op(b[p]) for contiguous row-major a and b, where op
// transposes when asked: a is [batch, m, k] (or [batch, k, m] transposed),
// b is [batch, k, n] (or [batch, n, k]). A row-major C is a column-major
// C^T = op(B)^T · op(A)^T, so BLAS gets b before a.
torch::Tensor product(const torch::Tensor& a, const torch::Tensor& b, bool trans_a, bool trans_b) {
  const int m = static_cast<int>(a.size(trans_a ? 2 : 1)), k = static_cast<int>(a.size(trans_a ? 1 : 2));
  const int n = static_cast<int>(b.size(trans_b ? 1 : 2));
  const std::int64_t batch = a.size(0);
  auto out = torch::empty({batch, m, n}, a.options());
  const float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  float* pc = out.data_ptr<float>();
  const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
  const char* ta = trans_a ? "T" : "N";
  const char* tb = trans_b ? "T" : "N";
  const float one = 1.f, zero = 0.f;
  const std::int64_t per = static_cast<std::int64_t>(m) * k * n;
  at::parallel_for(0, batch, std::max<std::int64_t>(1, 32768 / per), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p)
      sgemm_(tb, ta, &n, &m, &k, &one, pb + p * k * n, &ldb, pa + p * m * k, &lda, &zero, pc + p * m * n, &n);
  });
  return out;
}

struct SmallBatchedProduct : torch::autograd::Function<SmallBatchedProduct> {
  // a [batch, m, k], b [batch, k, n], both contiguous.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                               const torch::Tensor& b) {
    ctx->save_for_backward({a, b});
    return product(a, b, false, false);
  }

  // d a = g · b^T, d b = a^T · g.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto g = grads[0].contiguous();
    return {product(g, saved[1], false, true), product(saved[0], g, true, false)};
  }
};

}  // namespace

bool uses_small_path(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.dim() < 3 || a.dim() != b.dim()) return false;
  if (a.scalar_type() != torch::kFloat32 || b.scalar_type() != torch::kFloat32) return false;
  if (!a.device().is_cpu() || !b.device().is_cpu()) return false;
  const auto d = a.dim();
  if (a.sizes().slice(0, d - 2) != b.sizes().slice(0, d - 2) || a.size(d - 1) != b.size(d - 2)) return false;
  const std::int64_t work = a.size(d - 2) * a.size(d - 1) * b.size(d - 1);
  return work >= 400 && work <= kSmallProductLimit;
}

torch::Tensor batched_matmul(const torch::Tensor& a, const torch::Tensor& b) {
  if (!uses_small_path(a, b)) return torch::matmul(a, b);
  const auto d = a.dim();
  const std::int64_t m = a.size(d - 2), k = a.size(d - 1), n = b.size(d - 1);
  auto shape = a.sizes().vec();
  shape.back() = n;
  auto out = SmallBatchedProduct::apply(a.reshape({-1, m, k}).contiguous(), b.reshape({-1, k, n}).contiguous());
  return out.view(shape);
}

}  // namespace trident::nn
