// Reference GEMM: every element of C one f64 dot product over K, rounded once into C's dtype.
#include "mixprec/numerics/convert.h"
#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

// The `n` elements of a raw buffer of dtype dt from its start, widened exactly to f64 (one
// bulk conversion: per-element calls would open a parallel region each).
std::vector<double> load(DType dt, const void* base, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  widen_to_f64(dt, base, v.data(), v.size());
  return v;
}

// Elements an operand spans: the last matrix's last stored row ends it.
int64_t extent(int64_t batch, int64_t batch_stride, int64_t rows, int64_t cols, int64_t ld) {
  if (rows == 0 || cols == 0) return 0;
  return (batch - 1) * batch_stride + (rows - 1) * ld + cols;
}

// op(X) of matrix bi at (r, c), X stored row-major with leading dimension ld, or Xᵀ.
struct Matrix {
  std::vector<double> v;
  const GemmOperand& x;
  double at(int64_t bi, int64_t r, int64_t c) const {
    return v[static_cast<size_t>(bi * x.batch_stride + (x.trans ? c * x.ld + r : r * x.ld + c))];
  }
};

}  // namespace

// C[b](i, j) = alpha·Σ_p op(A[b])(i, p)·op(B[b])(p, j) + beta·C[b](i, j) + row_bias(j).
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a, const GemmOperand& b,
          float beta, const GemmOutput& c, int64_t batch) {
  if (batch == 0 || m == 0 || n == 0) return;
  const Matrix A{
      load(a.dtype, a.data, extent(batch, a.batch_stride, a.trans ? k : m, a.trans ? m : k, a.ld)),
      a};
  const Matrix B{
      load(b.dtype, b.data, extent(batch, b.batch_stride, b.trans ? n : k, b.trans ? k : n, b.ld)),
      b};
  const int64_t c_extent = extent(batch, c.batch_stride, m, n, c.ld);
  const std::vector<double> C = beta != 0.0f ? load(c.dtype, c.data, c_extent)
                                             : std::vector<double>(static_cast<size_t>(c_extent));
  const std::vector<double> bias =
      c.row_bias ? load(c.dtype, c.row_bias, n) : std::vector<double>();
  std::vector<double> out(C.size());
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t p = 0; p < k; ++p) dot += A.at(bi, i, p) * B.at(bi, p, j);
        const auto at = static_cast<size_t>(bi * c.batch_stride + i * c.ld + j);
        double r = static_cast<double>(alpha) * dot;
        if (beta != 0.0f) r += static_cast<double>(beta) * C[at];  // beta 0 never reads C
        if (c.row_bias) r += bias[static_cast<size_t>(j)];
        out[at] = r;
      }
  // Rows of C are written one by one so the gaps between them stay untouched.
  const auto esz = static_cast<int64_t>(dtype_size(c.dtype));
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i) {
      const int64_t row = bi * c.batch_stride + i * c.ld;
      convert_from_f64(out.data() + row, c.dtype, static_cast<char*>(c.data) + row * esz,
                       static_cast<size_t>(n));
    }
}

}  // namespace mixprec::backend::reference
