// GEMM: a fixed tile grid over OpenMP, OpenBLAS single-threaded per tile, narrow operands
// widened in K-blocks. See gemm.h for the contract.
#include "mixprec/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "mixprec/error.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/parallel.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kBlockK = 256;                  // K-block of a widened operand: stays in L2
constexpr int64_t kMaxAccTile = 1 << 21;          // f32 elements of a narrow C's accumulator tile
constexpr int64_t kMinSplitFlops = 1 << 22;       // below this one tile is faster than two
constexpr int64_t kMinBatchSplitFlops = 1 << 26;  // batched: split a matrix only when huge

// OpenBLAS's own threads would fight mixprec's OpenMP threads for the cores.
void pin_openblas_to_one_thread() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

bool is_gemm_float(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// Per-thread buffers: 0/1 = K-blocks of A/B, 2 = f32 C tile, 3/4 = whole shared A/B.
std::vector<float>& scratch(int slot) {
  thread_local std::vector<float> buffers[5];
  return buffers[slot];
}

float* scratch_floats(int slot, int64_t n) {
  auto& v = scratch(slot);
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

const char* at(const void* base, DType t, int64_t elements) {
  return static_cast<const char*>(base) + elements * static_cast<int64_t>(dtype_size(t));
}

// An f32 view of one operand block: rows r0..r1 of op(X) (the outer dim) and k0..k1 of the
// inner dim, widened into `dst` when X is narrow. Returns the f32 pointer and its ld.
struct F32Block {
  const float* data;
  int64_t ld;
};

// X is op(X) = [outer, inner] with X stored transposed when `trans`.
F32Block widen_block(const GemmOperand& x, const void* base, int64_t r0, int64_t r1, int64_t k0,
                     int64_t k1, float* dst) {
  const int64_t rows = r1 - r0, cols = k1 - k0;
  if (x.dtype == DType::f32) {
    const float* p = static_cast<const float*>(base);
    return {x.trans ? p + k0 * x.ld + r0 : p + r0 * x.ld + k0, x.ld};
  }
  if (!x.trans) {  // stored [outer, inner]: one widened row per outer index
    for (int64_t r = 0; r < rows; ++r)
      widen_row_f32(x.dtype, at(base, x.dtype, (r0 + r) * x.ld + k0), dst + r * cols,
                    static_cast<size_t>(cols));
    return {dst, cols};
  }
  for (int64_t kk = 0; kk < cols; ++kk)  // stored [inner, outer]
    widen_row_f32(x.dtype, at(base, x.dtype, (k0 + kk) * x.ld + r0), dst + kk * rows,
                  static_cast<size_t>(rows));
  return {dst, rows};
}

// Widens all of op(X) ([outer, inner]) into dst, rows shared out over threads.
F32Block widen_whole(const GemmOperand& x, const void* base, int64_t outer, int64_t inner,
                     float* dst) {
  if (x.dtype == DType::f32) return {static_cast<const float*>(base), x.ld};
  const int64_t stored_rows = x.trans ? inner : outer, stored_cols = x.trans ? outer : inner;
  parallel_for(stored_rows, std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(stored_cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   widen_row_f32(x.dtype, at(base, x.dtype, r * x.ld), dst + r * stored_cols,
                                 static_cast<size_t>(stored_cols));
               });
  return {dst, stored_cols};
}

// B is op(B) = [k, n] = [inner, outer]: in the outer/inner terms above it is "transposed"
// exactly when it is stored untransposed.
GemmOperand outer_inner_b(GemmOperand b) {
  b.trans = !b.trans;
  return b;
}

// Offsets a widened whole operand to rows r0.. and inner index k0.
F32Block sub_block(const F32Block& w, bool trans, int64_t r0, int64_t k0) {
  return {trans ? w.data + k0 * w.ld + r0 : w.data + r0 * w.ld + k0, w.ld};
}

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, F32Block a, F32Block b,
           float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha,
              a.data, static_cast<blasint>(a.ld), b.data, static_cast<blasint>(b.ld), beta, c,
              static_cast<blasint>(ldc));
}

struct Problem {
  int64_t m, n, k;
  float alpha, beta;
  GemmOperand a, b;
  GemmOutput c;
};

// One C tile [m0, m1) x [n0, n1) of matrix `bi`. `shared_a`/`shared_b` are whole widened
// operands when the caller prepared them (data == nullptr otherwise).
void run_tile(const Problem& p, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
              F32Block shared_a, F32Block shared_b) {
  const int64_t mw = m1 - m0, nw = n1 - n0, K = p.k;
  if (p.c.dtype != DType::f32 && mw * nw > kMaxAccTile) {
    // Bound the f32 accumulator (an lm_head tile can be hundreds of MB): halve the tile's
    // longer side. The halves depend on the tile only, so the bits stay fixed.
    if (mw >= nw) {
      const int64_t half = std::min(mw - 1, ((mw + 1) / 2 + 15) / 16 * 16);
      run_tile(p, bi, m0, m0 + half, n0, n1, shared_a, shared_b);
      run_tile(p, bi, m0 + half, m1, n0, n1, shared_a, shared_b);
    } else {
      const int64_t half = std::min(nw - 1, ((nw + 1) / 2 + 15) / 16 * 16);
      run_tile(p, bi, m0, m1, n0, n0 + half, shared_a, shared_b);
      run_tile(p, bi, m0, m1, n0 + half, n1, shared_a, shared_b);
    }
    return;
  }
  const void* abase = at(p.a.data, p.a.dtype, bi * p.a.batch_stride);
  const void* bbase = at(p.b.data, p.b.dtype, bi * p.b.batch_stride);
  char* cbase = static_cast<char*>(p.c.data) +
                bi * p.c.batch_stride * static_cast<int64_t>(dtype_size(p.c.dtype));
  // Accumulator: C itself when f32, else an f32 tile rounded once at the end.
  float* acc;
  int64_t ldacc;
  if (p.c.dtype == DType::f32) {
    acc = reinterpret_cast<float*>(cbase) + m0 * p.c.ld + n0;
    ldacc = p.c.ld;
  } else {
    acc = scratch_floats(2, mw * nw);
    ldacc = nw;
    if (p.beta != 0.0f)
      for (int64_t i = 0; i < mw; ++i)
        widen_row_f32(p.c.dtype, at(cbase, p.c.dtype, (m0 + i) * p.c.ld + n0), acc + i * nw,
                      static_cast<size_t>(nw));
  }
  const bool widen_a = p.a.dtype != DType::f32 && !shared_a.data;
  const bool widen_b = p.b.dtype != DType::f32 && !shared_b.data;
  const int64_t kc = (widen_a || widen_b) ? kBlockK : std::max<int64_t>(K, 1);
  float* abuf = widen_a ? scratch_floats(0, mw * std::min(kc, K)) : nullptr;
  float* bbuf = widen_b ? scratch_floats(1, nw * std::min(kc, K)) : nullptr;
  // The bias in f32: the accumulator starts from it when C is not read (beta == 0), else it
  // is added after the products.
  std::vector<float> bias;
  if (p.c.row_bias) {
    bias.resize(static_cast<size_t>(nw));
    widen_row_f32(p.c.dtype, at(p.c.row_bias, p.c.dtype, n0), bias.data(), static_cast<size_t>(nw));
  }
  const bool bias_first = !bias.empty() && p.beta == 0.0f && K > 0;
  if (bias_first)
    for (int64_t i = 0; i < mw; ++i) std::copy(bias.begin(), bias.end(), acc + i * ldacc);
  if (K == 0) {  // C = beta * C
    for (int64_t i = 0; i < mw; ++i)
      for (int64_t j = 0; j < nw; ++j)
        acc[i * ldacc + j] = p.beta == 0.0f ? 0.0f : p.beta * acc[i * ldacc + j];
  }
  const float first_beta = bias_first ? 1.0f : p.beta;
  for (int64_t k0 = 0; k0 < K; k0 += kc) {
    const int64_t k1 = std::min(K, k0 + kc);
    const F32Block ab = shared_a.data ? sub_block(shared_a, p.a.trans, m0, k0)
                                      : widen_block(p.a, abase, m0, m1, k0, k1, abuf);
    const F32Block bb = shared_b.data
                            ? sub_block(shared_b, !p.b.trans, n0, k0)
                            : widen_block(outer_inner_b(p.b), bbase, n0, n1, k0, k1, bbuf);
    sgemm(p.a.trans, p.b.trans, mw, nw, k1 - k0, p.alpha, ab, bb, k0 == 0 ? first_beta : 1.0f, acc,
          ldacc);
  }
  if (!bias.empty() && !bias_first)
    for (int64_t i = 0; i < mw; ++i)
      for (int64_t j = 0; j < nw; ++j) acc[i * ldacc + j] += bias[static_cast<size_t>(j)];
  if (p.c.dtype != DType::f32)
    for (int64_t i = 0; i < mw; ++i)
      narrow_row_f32(acc + i * nw, p.c.dtype,
                     const_cast<char*>(at(cbase, p.c.dtype, (m0 + i) * p.c.ld + n0)),
                     static_cast<size_t>(nw));
}

void check_operand(const char* name, const GemmOperand& x, int64_t rows, int64_t cols) {
  // rows x cols is the stored shape.
  MIXPREC_CHECK(x.data != nullptr || rows * cols == 0, "gemm", std::string(name) + " is null");
  MIXPREC_CHECK(x.ld >= cols && (x.ld >= 1 || rows * cols == 0), "gemm",
                std::string(name) + ": leading dimension " + std::to_string(x.ld) +
                    " < row length " + std::to_string(cols));
}

void add_bias_f64(const Problem& p, double* c, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (!p.c.row_bias) return;
  const double* bias = static_cast<const double*>(p.c.row_bias);
  for (int64_t i = m0; i < m1; ++i)
    for (int64_t j = n0; j < n1; ++j) c[i * p.c.ld + j] += bias[j];
}

void gemm_f64(const Problem& p, int64_t batch, const GemmGrid& grid) {
  const int64_t items = batch * grid.pieces;
#pragma omp parallel for schedule(static) if (items > 1 && num_threads() > 1)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t bi = it / grid.pieces, pc = it % grid.pieces;
    const int64_t dim = grid.split_m ? p.m : p.n;
    const int64_t r0 = std::min(dim, pc * grid.piece), r1 = std::min(dim, r0 + grid.piece);
    const int64_t m0 = grid.split_m ? r0 : 0, m1 = grid.split_m ? r1 : p.m;
    const int64_t n0 = grid.split_m ? 0 : r0, n1 = grid.split_m ? p.n : r1;
    if (m1 <= m0 || n1 <= n0) continue;
    const double* a = static_cast<const double*>(p.a.data) + bi * p.a.batch_stride;
    const double* b = static_cast<const double*>(p.b.data) + bi * p.b.batch_stride;
    double* c = static_cast<double*>(p.c.data) + bi * p.c.batch_stride;
    if (p.k == 0) {  // C = beta * C (BLAS wants ld >= 1 even for empty operands)
      for (int64_t i = m0; i < m1; ++i)
        for (int64_t j = n0; j < n1; ++j)
          c[i * p.c.ld + j] = p.beta == 0.0f ? 0.0 : p.beta * c[i * p.c.ld + j];
      add_bias_f64(p, c, m0, m1, n0, n1);
      continue;
    }
    cblas_dgemm(CblasRowMajor, p.a.trans ? CblasTrans : CblasNoTrans,
                p.b.trans ? CblasTrans : CblasNoTrans, static_cast<blasint>(m1 - m0),
                static_cast<blasint>(n1 - n0), static_cast<blasint>(p.k), p.alpha,
                p.a.trans ? a + m0 : a + m0 * p.a.ld, static_cast<blasint>(p.a.ld),
                p.b.trans ? b + n0 * p.b.ld : b + n0, static_cast<blasint>(p.b.ld), p.beta,
                c + m0 * p.c.ld + n0, static_cast<blasint>(p.c.ld));
    add_bias_f64(p, c, m0, m1, n0, n1);
  }
}

}  // namespace

GemmGrid gemm_grid(int64_t m, int64_t n, int64_t k, int64_t batch) {
  const int64_t flops = 2 * m * n * k;
  const bool split_m = m >= n;
  const int64_t dim = split_m ? m : n;
  const int64_t min_flops = batch > 1 ? kMinBatchSplitFlops : kMinSplitFlops;
  if (flops < min_flops || dim < 32) return {1, split_m, dim};
  // Two pieces (one per core here), more for very tall problems: each piece stays large
  // enough that OpenBLAS's packing of the shared operand is amortised.
  const int64_t pieces = std::clamp<int64_t>(dim / 2048, 2, 8);
  const int64_t piece = ((dim + pieces - 1) / pieces + 15) / 16 * 16;
  return {(dim + piece - 1) / piece, split_m, piece};
}

void gemm(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a, const GemmOperand& b,
          float beta, const GemmOutput& c, int64_t batch) {
  MIXPREC_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "gemm",
                "negative size m=" + std::to_string(m) + " n=" + std::to_string(n) +
                    " k=" + std::to_string(k) + " batch=" + std::to_string(batch));
  const bool f64 = a.dtype == DType::f64 || b.dtype == DType::f64 || c.dtype == DType::f64;
  if (f64)
    MIXPREC_CHECK(a.dtype == DType::f64 && b.dtype == DType::f64 && c.dtype == DType::f64, "gemm",
                  "f64 GEMM needs A, B and C all f64");
  else
    MIXPREC_CHECK(is_gemm_float(a.dtype) && is_gemm_float(b.dtype) && is_gemm_float(c.dtype),
                  "gemm",
                  std::string("dtypes A=") + dtype_name(a.dtype) + " B=" + dtype_name(b.dtype) +
                      " C=" + dtype_name(c.dtype) + "; supported: f32, bf16, f16 (or all f64)");
  check_operand("A", a, a.trans ? k : m, a.trans ? m : k);
  check_operand("B", b, b.trans ? n : k, b.trans ? k : n);
  MIXPREC_CHECK(c.ld >= std::max<int64_t>(n, 1), "gemm",
                "C: leading dimension " + std::to_string(c.ld) + " < " + std::to_string(n));
  if (m == 0 || n == 0 || batch == 0) return;
  pin_openblas_to_one_thread();
  const Problem p{m, n, k, alpha, beta, a, b, c};
  const GemmGrid grid = gemm_grid(m, n, k, batch);
  if (f64) return gemm_f64(p, batch, grid);

  if (grid.pieces == 1) {  // whole matrices, in parallel over the batch
#pragma omp parallel for schedule(static) if (batch > 1 && num_threads() > 1)
    for (int64_t bi = 0; bi < batch; ++bi) run_tile(p, bi, 0, m, 0, n, {}, {});
    return;
  }
  // Split one matrix at a time: the operand every piece reads is widened once, in parallel.
  for (int64_t bi = 0; bi < batch; ++bi) {
    F32Block shared_a{}, shared_b{};
    if (!grid.split_m && a.dtype != DType::f32)
      shared_a =
          widen_whole(a, at(a.data, a.dtype, bi * a.batch_stride), m, k, scratch_floats(3, m * k));
    if (grid.split_m && b.dtype != DType::f32)
      shared_b = widen_whole(outer_inner_b(b), at(b.data, b.dtype, bi * b.batch_stride), n, k,
                             scratch_floats(4, n * k));
#pragma omp parallel for schedule(static) if (num_threads() > 1)
    for (int64_t pc = 0; pc < grid.pieces; ++pc) {
      const int64_t dim = grid.split_m ? m : n;
      const int64_t r0 = pc * grid.piece, r1 = std::min(dim, r0 + grid.piece);
      if (grid.split_m)
        run_tile(p, bi, r0, r1, 0, n, shared_a, shared_b);
      else
        run_tile(p, bi, 0, m, r0, r1, shared_a, shared_b);
    }
  }
}

}  // namespace mixprec::cpu
