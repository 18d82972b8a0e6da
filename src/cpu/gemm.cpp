// GEMM: a fixed grid over OpenMP (C tiles, or K-ranges of whole matrices), each piece run
// single-threaded by AMX or AVX512-BF16 (bf16 x bf16), mixprec's own block product (AVX-512
// or AVX2), or OpenBLAS with narrow operands widened in K-blocks. See gemm.h for the contract.
#include "mixprec/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "gemm_amx.h"
#include "gemm_avx512_bf16.h"
#include "gemm_epilogue.h"
#include "gemm_own.h"
#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "path_switch.h"

namespace mixprec::cpu {
namespace {

// K-block of a widened operand. Both operands' blocks are widened right before the sgemm
// that packs them, so OpenBLAS packs from L2 rather than from an f32 copy in memory
// (measured: widening the operand all tiles share once, whole, was 3-10% slower, most on
// long-K shapes). 128 and 512 measured worse than 256.
constexpr int64_t kBlockK = 256;
// A widened block's rows are short strided segments that the hardware prefetcher misses:
// fetching the segment kPrefetchRows rows ahead measured 1.5-2% faster overall.
constexpr int64_t kPrefetchRows = 4;
constexpr int64_t kMaxAccTile = 1 << 21;          // f32 elements of a narrow C's accumulator tile
constexpr int64_t kMinSplitFlops = 1 << 22;       // below this one tile is faster than two
constexpr int64_t kMinBatchSplitFlops = 1 << 26;  // batched: split a matrix only when huge
// K-split (see gemm_grid): when K >= kSplitKRatio * max(m, n), and its f32 partials fit in
// kMaxSplitKFloats (64 MB).
constexpr int64_t kSplitKRatio = 4;
constexpr int64_t kMaxSplitKFloats = int64_t{1} << 24;

// OpenBLAS's own threads would fight mixprec's OpenMP threads for the cores.
void pin_openblas_to_one_thread() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

bool is_gemm_float(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16;
}

// Per-thread buffers: 0/1 = K-blocks of A/B, 2 = f32 C tile, 3 = K-split partials (the
// calling thread's, shared by the pieces).
std::vector<float>& scratch(int slot) {
  thread_local std::vector<float> buffers[4];
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
    const int64_t esz = static_cast<int64_t>(dtype_size(x.dtype));
    for (int64_t r = 0; r < rows; ++r) {
      if (r + kPrefetchRows < rows) {
        const char* nx = at(base, x.dtype, (r0 + r + kPrefetchRows) * x.ld + k0);
        for (int64_t o = 0; o < cols * esz; o += 64) __builtin_prefetch(nx + o);
      }
      widen_row_f32(x.dtype, at(base, x.dtype, (r0 + r) * x.ld + k0), dst + r * cols,
                    static_cast<size_t>(cols));
    }
    return {dst, cols};
  }
  for (int64_t kk = 0; kk < cols; ++kk)  // stored [inner, outer]
    widen_row_f32(x.dtype, at(base, x.dtype, (k0 + kk) * x.ld + r0), dst + kk * rows,
                  static_cast<size_t>(rows));
  return {dst, rows};
}

// B is op(B) = [k, n] = [inner, outer]: in the outer/inner terms above it is "transposed"
// exactly when it is stored untransposed.
GemmOperand outer_inner_b(GemmOperand b) {
  b.trans = !b.trans;
  return b;
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

// The kernel that multiplies operands of these dtypes with the current switches: bf16 x bf16
// on AMX tiles or VDPBF16PS where the CPU has them, else mixprec's f32 kernel that widens as
// it packs, else OpenBLAS on widened K-blocks.
enum class Kernel { amx, dot_bf16, own_f32, openblas };

Kernel kernel_for(DType a, DType b) {
  if (a == DType::bf16 && b == DType::bf16) {
    if (amx::enabled()) return Kernel::amx;
    if (avx512_bf16_gemm::enabled()) return Kernel::dot_bf16;
  }
  return own_gemm::enabled() ? Kernel::own_f32 : Kernel::openblas;
}

// acc[mw x nw] (+)= alpha * op(A)[m0:m1, k0:k1] · op(B)[k0:k1, n0:n1] for matrix `bi`; the
// first K-block uses `first_beta`. Narrow operands are widened one K-block at a time. An
// epilogue is only for the kernels epilogue_kernel() names.
void multiply_into(const Problem& p, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                   int64_t k0, int64_t k1, float first_beta, float* acc, int64_t ldacc,
                   const GemmEpilogue* epilogue = nullptr) {
  const void* abase = at(p.a.data, p.a.dtype, bi * p.a.batch_stride);
  const void* bbase = at(p.b.data, p.b.dtype, bi * p.b.batch_stride);
  const Kernel kernel = kernel_for(p.a.dtype, p.b.dtype);
  if (kernel == Kernel::amx || kernel == Kernel::dot_bf16) {
    // bf16 x bf16 on AMX tiles, else by VDPBF16PS: no widening, f32 sums.
    const auto* a16 = static_cast<const uint16_t*>(abase);
    const auto* b16 = static_cast<const uint16_t*>(bbase);
    const uint16_t* a0 = p.a.trans ? a16 + k0 * p.a.ld + m0 : a16 + m0 * p.a.ld + k0;
    const uint16_t* b0 = p.b.trans ? b16 + n0 * p.b.ld + k0 : b16 + k0 * p.b.ld + n0;
    if (kernel == Kernel::amx)
      amx::gemm_bf16(m1 - m0, n1 - n0, k1 - k0, p.alpha, a0, p.a.ld, p.a.trans, b0, p.b.ld,
                     p.b.trans, first_beta, acc, ldacc);
    else
      avx512_bf16_gemm::gemm(m1 - m0, n1 - n0, k1 - k0, p.alpha, a0, p.a.ld, p.a.trans, b0, p.b.ld,
                             p.b.trans, first_beta, acc, ldacc, epilogue);
    return;
  }
  if (kernel == Kernel::own_f32) {
    // Packing widens narrow operands itself: no separate widening pass.
    const int64_t a_off = p.a.trans ? k0 * p.a.ld + m0 : m0 * p.a.ld + k0;
    const int64_t b_off = p.b.trans ? n0 * p.b.ld + k0 : k0 * p.b.ld + n0;
    own_gemm::gemm(m1 - m0, n1 - n0, k1 - k0, p.alpha,
                   {p.a.dtype, at(abase, p.a.dtype, a_off), p.a.ld, p.a.trans},
                   {p.b.dtype, at(bbase, p.b.dtype, b_off), p.b.ld, p.b.trans}, first_beta, acc,
                   ldacc, epilogue);
    return;
  }
  const bool widen_a = p.a.dtype != DType::f32, widen_b = p.b.dtype != DType::f32;
  const int64_t kc = (widen_a || widen_b) ? kBlockK : std::max<int64_t>(k1 - k0, 1);
  const int64_t kmax = std::min(kc, k1 - k0);
  float* abuf = widen_a ? scratch_floats(0, (m1 - m0) * kmax) : nullptr;
  float* bbuf = widen_b ? scratch_floats(1, (n1 - n0) * kmax) : nullptr;
  for (int64_t kb = k0; kb < k1; kb += kc) {
    const int64_t ke = std::min(k1, kb + kc);
    const F32Block ab = widen_block(p.a, abase, m0, m1, kb, ke, abuf);
    const F32Block bb = widen_block(outer_inner_b(p.b), bbase, n0, n1, kb, ke, bbuf);
    sgemm(p.a.trans, p.b.trans, m1 - m0, n1 - n0, ke - kb, p.alpha, ab, bb,
          kb == k0 ? first_beta : 1.0f, acc, ldacc);
  }
}

// Columns [n0, n0 + n) of C's bias in f32 (empty without one).
std::vector<float> widened_bias(const Problem& p, int64_t n0, int64_t n) {
  std::vector<float> bias;
  if (p.c.row_bias) {
    bias.resize(static_cast<size_t>(n));
    widen_row_f32(p.c.dtype, at(p.c.row_bias, p.c.dtype, n0), bias.data(), static_cast<size_t>(n));
  }
  return bias;
}

// A narrow C that is not read (beta == 0), on one of mixprec's own kernels (AVX512-BF16, or
// the f32 one that widens as it packs, AVX-512 or AVX2): the kernel's epilogue adds the bias and
// rounds in registers, where an f32 tile was filled with the bias, finished and narrowed in passes
// of their own. Same bits (tests). AMX and OpenBLAS keep the passes.
bool epilogue_kernel(const Problem& p) {
  if (!(p.c.dtype == DType::bf16 || p.c.dtype == DType::f16) || p.beta != 0.0f || p.k == 0 ||
      !gemm_epilogue_enabled())
    return false;
  const Kernel kernel = kernel_for(p.a.dtype, p.b.dtype);
  return kernel == Kernel::dot_bf16 || kernel == Kernel::own_f32;
}

void run_fused_tile(const Problem& p, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t mw = m1 - m0, nw = n1 - n0;
  const std::vector<float> bias = widened_bias(p, n0, nw);
  auto* out = static_cast<uint16_t*>(p.c.data) + bi * p.c.batch_stride + m0 * p.c.ld + n0;
  const GemmEpilogue ep{bias.empty() ? nullptr : bias.data(), out, p.c.dtype == DType::f16, p.c.ld};
  // The f32 sums wait here between K-blocks (bounded by run_tile's halving).
  multiply_into(p, bi, m0, m1, n0, n1, 0, p.k, 0.0f, scratch_floats(2, mw * nw), nw, &ep);
}

// One C tile [m0, m1) x [n0, n1) of matrix `bi`, over the whole K.
void run_tile(const Problem& p, int64_t bi, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int64_t mw = m1 - m0, nw = n1 - n0, K = p.k;
  if (p.c.dtype != DType::f32 && mw * nw > kMaxAccTile) {
    // Bound the f32 accumulator (an lm_head tile can be hundreds of MB): halve the tile's
    // longer side. The halves depend on the tile only, so the bits stay fixed.
    if (mw >= nw) {
      const int64_t half = std::min(mw - 1, ((mw + 1) / 2 + 15) / 16 * 16);
      run_tile(p, bi, m0, m0 + half, n0, n1);
      run_tile(p, bi, m0 + half, m1, n0, n1);
    } else {
      const int64_t half = std::min(nw - 1, ((nw + 1) / 2 + 15) / 16 * 16);
      run_tile(p, bi, m0, m1, n0, n0 + half);
      run_tile(p, bi, m0, m1, n0 + half, n1);
    }
    return;
  }
  if (epilogue_kernel(p)) return run_fused_tile(p, bi, m0, m1, n0, n1);
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
  // The bias in f32: the accumulator starts from it when C is not read (beta == 0), else it
  // is added after the products.
  const std::vector<float> bias = widened_bias(p, n0, nw);
  const bool bias_first = !bias.empty() && p.beta == 0.0f && K > 0;
  if (bias_first)
    for (int64_t i = 0; i < mw; ++i) std::copy(bias.begin(), bias.end(), acc + i * ldacc);
  if (K == 0) {  // C = beta * C
    for (int64_t i = 0; i < mw; ++i)
      for (int64_t j = 0; j < nw; ++j)
        acc[i * ldacc + j] = p.beta == 0.0f ? 0.0f : p.beta * acc[i * ldacc + j];
  }
  multiply_into(p, bi, m0, m1, n0, n1, 0, K, bias_first ? 1.0f : p.beta, acc, ldacc);
  if (!bias.empty() && !bias_first)
    for (int64_t i = 0; i < mw; ++i)
      for (int64_t j = 0; j < nw; ++j) acc[i * ldacc + j] += bias[static_cast<size_t>(j)];
  if (p.c.dtype != DType::f32)
    for (int64_t i = 0; i < mw; ++i)
      narrow_row_f32(acc + i * nw, p.c.dtype,
                     const_cast<char*>(at(cbase, p.c.dtype, (m0 + i) * p.c.ld + n0)),
                     static_cast<size_t>(nw));
}

// C of matrix `bi` = (sum of the K-split partials, in piece order) + beta * C + bias, rounded
// once. parts holds `pieces` f32 [m x n] partials back to back.
void combine_partials(const Problem& p, int64_t bi, const float* parts, int64_t pieces) {
  char* cbase = static_cast<char*>(p.c.data) +
                bi * p.c.batch_stride * static_cast<int64_t>(dtype_size(p.c.dtype));
  const int64_t m = p.m, n = p.n;
  const auto un = static_cast<size_t>(n);
  const std::vector<float> bias = widened_bias(p, 0, n);
  parallel_for(m, std::max<int64_t>(1, (1 << 14) / n), [&](int64_t r0, int64_t r1) {
    std::vector<float> row(un), old(p.beta != 0.0f ? un : 0);
    for (int64_t i = r0; i < r1; ++i) {
      std::copy(parts + i * n, parts + i * n + n, row.begin());
      for (int64_t q = 1; q < pieces; ++q) {
        const float* part = parts + (q * m + i) * n;
        for (size_t j = 0; j < un; ++j) row[j] += part[j];
      }
      void* crow = const_cast<char*>(at(cbase, p.c.dtype, i * p.c.ld));
      if (p.beta != 0.0f) {
        widen_row_f32(p.c.dtype, crow, old.data(), un);
        for (size_t j = 0; j < un; ++j) row[j] += p.beta * old[j];
      }
      for (size_t j = 0; j < bias.size(); ++j) row[j] += bias[j];
      narrow_row_f32(row.data(), p.c.dtype, crow, un);
    }
  });
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

thread_local bool t_whole_products = false;  // set_whole_products

PathSwitch& epilogue_switch() {
  static PathSwitch s("MIXPREC_GEMM_EPILOGUE");
  return s;
}

}  // namespace

void set_gemm_epilogue_enabled(bool enabled) {
  epilogue_switch().set(enabled);
}

bool gemm_epilogue_enabled() {
  return epilogue_switch().on();
}

bool set_whole_products(bool whole) {
  const bool saved = t_whole_products;
  t_whole_products = whole;
  return saved;
}

const char* bf16_gemm_path() {
  switch (kernel_for(DType::bf16, DType::bf16)) {
    case Kernel::amx:
      return "amx";
    case Kernel::dot_bf16:
      return "avx512-bf16";
    case Kernel::own_f32:
      return own_gemm::build() == own_gemm::Build::avx2 ? "avx2 (widened)" : "avx512 (widened)";
    default:
      return "openblas (widened)";
  }
}

bool bf16_gemm_is_native() {
  const Kernel kernel = kernel_for(DType::bf16, DType::bf16);
  return kernel == Kernel::amx || kernel == Kernel::dot_bf16;
}

GemmGrid gemm_grid(int64_t m, int64_t n, int64_t k, int64_t batch) {
  const int64_t flops = 2 * m * n * k;
  const bool split_m = m >= n;
  const int64_t dim = split_m ? m : n;
  const int64_t min_flops = batch > 1 ? kMinBatchSplitFlops : kMinSplitFlops;
  if (flops < min_flops) return {1, split_m, dim};
  // Every piece of a C split packs (and widens) the whole operand the pieces share; when K
  // dwarfs m and n (weight gradients) that is most of the data, so split K instead: each
  // piece reads its own K-range of both operands once, into an f32 partial of C. Measured
  // on dW shapes (m, n <= K / 4): 3-15% faster than a C split for f32 and bf16.
  if (k >= kSplitKRatio * std::max(m, n)) {
    const int64_t pieces = std::clamp<int64_t>(k / 4096, 2, 8);
    const int64_t piece = ((k + pieces - 1) / pieces + 63) / 64 * 64;
    if (((k + piece - 1) / piece) * m * n <= kMaxSplitKFloats)
      return {(k + piece - 1) / piece, false, piece, true};
  }
  if (dim < 32) return {1, split_m, dim};
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
  GemmGrid grid = gemm_grid(m, n, k, batch);
  if (t_whole_products && !grid.split_k) grid = {1, grid.split_m, grid.split_m ? m : n};
  // f64 is for checking: it never splits K (whole matrices in parallel over the batch).
  if (f64) return gemm_f64(p, batch, grid.split_k ? GemmGrid{1, true, m} : grid);

  if (grid.split_k) {
    const int64_t kp = grid.piece;
    float* parts = scratch_floats(3, grid.pieces * m * n);
    for (int64_t bi = 0; bi < batch; ++bi) {
#pragma omp parallel for schedule(static) if (num_threads() > 1)
      for (int64_t pc = 0; pc < grid.pieces; ++pc)
        multiply_into(p, bi, 0, m, 0, n, pc * kp, std::min(k, (pc + 1) * kp), 0.0f,
                      parts + pc * m * n, n);
      combine_partials(p, bi, parts, grid.pieces);
    }
    return;
  }
  if (grid.pieces == 1) {  // whole matrices, in parallel over the batch
#pragma omp parallel for schedule(static) if (batch > 1 && num_threads() > 1)
    for (int64_t bi = 0; bi < batch; ++bi) run_tile(p, bi, 0, m, 0, n);
    return;
  }
  // Split one matrix at a time.
  for (int64_t bi = 0; bi < batch; ++bi) {
#pragma omp parallel for schedule(static) if (num_threads() > 1)
    for (int64_t pc = 0; pc < grid.pieces; ++pc) {
      const int64_t dim = grid.split_m ? m : n;
      const int64_t r0 = pc * grid.piece, r1 = std::min(dim, r0 + grid.piece);
      if (grid.split_m)
        run_tile(p, bi, r0, r1, 0, n);
      else
        run_tile(p, bi, 0, m, r0, r1);
    }
  }
}

}  // namespace mixprec::cpu
