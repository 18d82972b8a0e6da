// The kernel backend table: every kernel that ops, autograd, amp, optim and dist run is an
// entry here, and they reach compute only through the current backend's table (as ggml's
// backend interface and mlx's eval_cpu do). Two backends serve CPU tensors:
//   cpu        the fast kernels (src/cpu): vector code, AMX / AVX-512 GEMMs, threads;
//   reference  short scalar kernels with f64 accumulation (src/backend/reference): the oracle
//              the op registry test compares `cpu` against, op by op and dtype by dtype.
// Every kernel's contract is the same on both: inputs of any storage dtype, math wider than
// storage, one rounding into the result's dtype, results independent of the thread count.
// `cpu` accumulates in f32 (f64 for f64 operands) in a fixed order; `reference` in f64, so
// the two differ within the accumulate dtype's rounding, never more.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "mixprec/backend/kernel_types.h"
#include "mixprec/backend/quantized.h"

namespace mixprec::backend {

struct Backend {
  std::string_view name;

  // ---- GEMM: C[b] = alpha·op(A[b])·op(B[b]) + beta·C[b] (+ row_bias), b < batch ----------
  // op(A) m×k, op(B) k×n; A, B f32/bf16/f16 and C any of those (all f64 for checking).
  // beta == 0 never reads C.
  void (*gemm)(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a,
               const GemmOperand& b, float beta, const GemmOutput& c, int64_t batch);
  // Sets whether gemm runs each product whole on the calling thread (for callers that
  // spread independent products over the threads themselves); returns the previous setting.
  // The bits do not change; only the work split does.
  bool (*set_whole_products)(bool whole);

  // ---- FP8 / MX (quantized.h) ---------------------------------------------------------------
  // x [rows, cols] (f32/bf16/f16, any strides) -> elements in spec.element and one scale per
  // block: per block amax (NaN if any element is), scale_from_amax, then each element x·v or
  // x / v in f32, saturated to the format's max and rounded to nearest even.
  Quantized (*quantize)(const Tensor& x, const QuantSpec& spec);
  // C [m, n] = A·Bᵀ from A [m, k], B [n, k]: for each K-step (scaled_gemm_k_step) the sum of
  // exact element products in f32, times A's row descale, times B's, added to C in K order;
  // rounded once into out_dtype (f32, bf16, f16). A GEMM of one step scales in the epilogue;
  // when every descale is a power of two (scaling is then exact) the exact products may be
  // summed in f32 over all of k at once.
  Tensor (*scaled_gemm)(const Quantized& a, const Quantized& b, DType out_dtype);

  // ---- elementwise ------------------------------------------------------------------------
  // a op b, both broadcast (NumPy rules) to `shape`, a new contiguous tensor of `out_dtype`.
  Tensor (*binary)(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape,
                   DType out_dtype);
  // -g·a/b² (as -(g/b)·(a/b)): the gradient of a/b for b before the broadcast sum.
  Tensor (*div_grad_b)(const Tensor& g, const Tensor& a, const Tensor& b, DType out_dtype);
  // x·s, s rounded to f32 first (kept in f64 when x or the result is f64).
  Tensor (*scale)(const Tensor& x, double s, DType out_dtype);
  Tensor (*activation_forward)(Activation act, const Tensor& x);  // in x's dtype
  // g·act'(x) in x's dtype.
  Tensor (*activation_backward)(Activation act, const Tensor& x, const Tensor& g);
  // f(x) in x's dtype, and g·f'(x) (f' from x, not from a rounded result) in x's dtype.
  Tensor (*pointwise_forward)(const Pointwise& f, const Tensor& x);
  Tensor (*pointwise_backward)(const Pointwise& f, const Tensor& x, const Tensor& g);
  Tensor (*swiglu_forward)(const Tensor& gate, const Tensor& up);  // silu(gate)·up
  // {g·up·silu'(gate), g·silu(gate)} in gate's and up's dtypes; undefined unless wanted.
  std::array<Tensor, 2> (*swiglu_backward)(const Tensor& gate, const Tensor& up, const Tensor& g,
                                           bool want_gate, bool want_up);
  // Keeps element i iff philox_u32(seed, stream, i) >= floor(p·2^32); kept ones times 1/(1-p).
  Tensor (*dropout_forward)(const Tensor& x, double p, uint64_t seed, uint64_t stream);
  Tensor (*dropout_backward)(const Tensor& g, double p, uint64_t seed, uint64_t stream,
                             DType out_dtype);

  // ---- reductions over [outer, n, inner] (contiguous x) -------------------------------------
  // -> [outer, inner] in reduce_acc_dtype, unrounded.
  Tensor (*reduce_dim)(const Tensor& x, ReduceGeometry g, ReduceOp op);
  // grad [outer, inner] broadcast over n (divided by n for mean) -> [outer, n, inner] `dtype`.
  Tensor (*reduce_expand_backward)(const Tensor& grad, ReduceGeometry g, bool mean, DType dtype);
  // x·(grad / norm) in x's dtype, zero where norm == 0 (norm: reduce_dim's unrounded result).
  Tensor (*l2_norm_backward)(const Tensor& grad, const Tensor& x, const Tensor& norm,
                             ReduceGeometry g);
  // Max over n: values in x's dtype, i64 indices; first maximum wins ties, NaN is maximal.
  std::pair<Tensor, Tensor> (*max_dim)(const Tensor& x, ReduceGeometry g);
  // grad [outer, inner] placed at indices, zeros elsewhere -> [outer, n, inner] `dtype`.
  Tensor (*max_backward)(const Tensor& grad, const Tensor& indices, ReduceGeometry g, DType dtype);
  // f along n (kernel_types.h: LineOp) -> [outer, inner] (cumsum: [outer, n, inner]) in
  // reduce_acc_dtype, unrounded.
  Tensor (*line_forward)(const LineFunction& f, const Tensor& x, ReduceGeometry g);
  // g·∂f/∂x -> [outer, n, inner] in `dtype`, from x, line_forward's result and grad (of the
  // result's shape), with PyTorch's rules at zeros, ties and non-finite values.
  Tensor (*line_backward)(const LineFunction& f, const Tensor& x, const Tensor& result,
                          const Tensor& grad, ReduceGeometry g, DType dtype);
  // grad summed back to `shape` (which broadcasts to grad's), in grad's dtype or out_dtype.
  Tensor (*reduce_to_shape)(const Tensor& grad, const Shape& shape, std::optional<DType> out_dtype);

  // ---- elementwise functions of two tensors (kernel_types.h: PairOp) -----------------------
  // f of each element of x and t (one shape; pos_weight of that shape or undefined), in
  // reduce_acc_dtype, unrounded.
  Tensor (*pair_forward)(const PairFunction& f, const Tensor& x, const Tensor& t,
                         const Tensor& pos_weight);
  // {g·∂f/∂x, g·∂f/∂t} in reduce_acc_dtype (g of x's shape); undefined unless wanted.
  std::array<Tensor, 2> (*pair_backward)(const PairFunction& f, const Tensor& x, const Tensor& t,
                                         const Tensor& pos_weight, const Tensor& g, bool want_x,
                                         bool want_t);
  // ---- normalisation over the last dim (center: LayerNorm, else RMSNorm) --------------------
  // x contiguous [..., D]; weight, bias [D] of x's dtype or undefined. Fills stats.
  Tensor (*norm_forward)(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                         bool center, NormStats& stats);
  NormGrads (*norm_backward)(const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const NormStats& stats, bool center, bool need_dx, bool need_dweight,
                             bool need_dbias);

  // ---- softmax / log-softmax over the last dim (x contiguous) --------------------------------
  Tensor (*softmax)(const Tensor& x, bool log, SoftmaxStats* stats);
  Tensor (*softmax_backward)(const Tensor& x, const SoftmaxStats& stats, const Tensor& dy,
                             bool log);

  // ---- attention, rope ---------------------------------------------------------------------
  // q, k, v [B, H, T, Dh] of one dtype with rows_are_dense; causal: query i sees keys <= i.
  AttentionForward (*attention_forward)(const Tensor& q, const Tensor& k, const Tensor& v,
                                        bool causal, double scale, bool keep_acc_out);
  // dout of q's dtype or f32 with rows_are_dense; out: the forward output or its out_acc.
  AttentionGrads (*attention_backward)(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, const Tensor& dout,
                                       bool causal, double scale);
  // Rotate-half RoPE of contiguous x [..., T, Dh], positions offset..: the pair (i, i + Dh/2)
  // turns by position·inv_freq[i] (Dh/2 values), cos and sin times `factor`. inverse: the
  // transpose (minus the angle, the same factor), which is the backward.
  Tensor (*rope_rotate)(const Tensor& x, std::span<const double> inv_freq, double factor,
                        int64_t offset, bool inverse, DType out_dtype);

  // ---- embedding, cross-entropy --------------------------------------------------------------
  Tensor (*embedding_forward)(const Tensor& ids, const Tensor& weight);
  // dweight [V, D] in `acc` (f32 or f64): dy rows summed per id in position order.
  Tensor (*embedding_backward)(const Tensor& ids, const Tensor& dy, int64_t V, DType acc);
  // logits [N, V] contiguous, targets [N] contiguous i32/i64.
  CrossEntropyForward (*cross_entropy_forward)(const Tensor& logits, const Tensor& targets,
                                               int64_t ignore_index);
  Tensor (*cross_entropy_backward)(const Tensor& logits, const Tensor& targets,
                                   const CrossEntropyForward& saved, int64_t ignore_index,
                                   double scale);

  // ---- gather / scatter / selection (index values are checked: an Error names the first
  // one out of range, its position and the bound, under `op`) -------------------------------
  // out[i] = x[i with dim replaced by index[i]]: index's shape, or `out_shape` (at least
  // index's in every dim) with zeros beyond the index.
  Tensor (*gather)(const Tensor& x, int dim, const Tensor& index, const Shape& out_shape,
                   const char* op);
  // x + src scattered along dim by index (same dtype), summed in index order, rounded once.
  Tensor (*scatter_add)(const Tensor& x, int dim, const Tensor& index, const Tensor& src,
                        const char* op);
  // x [outer, n, inner]: out[o, index[i], :] += alpha·source[o, i, :], index 1-d.
  Tensor (*index_add)(const Tensor& x, ReduceGeometry g, const Tensor& index, const Tensor& source,
                      double alpha, const char* op);
  // out[o, i, :] = alpha·grad[o, index[i], :] -> [outer, m, inner] in `dtype`.
  Tensor (*index_select_scaled)(const Tensor& grad, ReduceGeometry g, const Tensor& index,
                                double alpha, DType dtype, const char* op);
  // The k largest (smallest) along n, sorted, ties to the lower index, NaN above all.
  std::pair<Tensor, Tensor> (*topk)(const Tensor& x, ReduceGeometry g, int64_t k, bool largest);
  Tensor (*topk_backward)(const Tensor& grad, const Tensor& indices, ReduceGeometry g, int64_t k,
                          DType dtype);
  // Contiguous parts of one dtype joined along dim.
  Tensor (*concat)(const std::vector<Tensor>& parts, int dim, const Shape& out_shape);

  // ---- mixture-of-experts rows (kernel_types.h: TokenSlots) ----------------------------------
  // x [N, d] -> per expert the rows of its tokens ([n_e, d], x's dtype, a copy).
  std::vector<Tensor> (*moe_dispatch)(const Tensor& x,
                                      const std::vector<std::vector<int64_t>>& tokens);
  // dx [n, d] in acc: each token's row gradients summed in expert order (grads [n_e, d]
  // contiguous in acc; an undefined one counts as zero).
  Tensor (*moe_dispatch_backward)(const std::vector<Tensor>& grads, const TokenSlots& slots,
                                  int64_t n, int64_t d, DType acc);
  // out [n, d] in acc: Σ over t's assignments (expert order) of gates[slot]·ys[e][row];
  // ys [n_e, d] and gates [N·k] contiguous in acc.
  Tensor (*moe_combine)(const std::vector<Tensor>& ys, const Tensor& gates, const TokenSlots& slots,
                        int64_t n, int64_t d);
  // dy_e[row] = gates[slot]·gout[t]; dgate[slot] = <gout[t], y_e[row]>; all in acc.
  MoeCombineGrads (*moe_combine_backward)(const Tensor& gout, const std::vector<Tensor>& ys,
                                          const Tensor& gates, const TokenSlots& slots);

  // ---- gradient sums, scans and the optimizer update ---------------------------------------
  void (*accumulate_into)(const Tensor& dst, const Tensor& src);  // dst += src (dst contiguous)
  Tensor (*add_same_shape)(const Tensor& a, const Tensor& b);     // a + b in a's dtype
  // g *= inv_scale in place (skipped when 1, rounded once); the index of the first tensor
  // holding a non-finite result, or -1. Tensors contiguous.
  int64_t (*unscale_and_check)(std::span<const Tensor> gs, float inv_scale);
  // The test alone on g·inv_scale as an optimizer reads it (f32), writing nothing.
  int64_t (*first_nonfinite)(std::span<const Tensor> gs, float inv_scale);
  // g = min(max(g, lo), hi) in place, compared in f64 and rounded once into g's dtype; NaN
  // stays NaN, ±inf become the bounds (torch.clamp). Tensors contiguous.
  void (*clamp_in_place)(std::span<const Tensor> gs, double lo, double hi);
  GradNumericsPass (*grad_numerics)(std::span<const Tensor> gs, double scale,
                                    double underflow_below, double overflow_above);
  // f64 sum of (g[i]·inv_scale)² over [begin, end) of a contiguous f32/bf16/f16 gradient,
  // each element widened to f32 and multiplied in f32 first (as an optimizer reads it).
  double (*square_sum)(const Tensor& grad, int64_t begin, int64_t end, float inv_scale);
  // One pass of `rule` over a parameter's buffers (kernel_types.h: UpdatePass).
  void (*update)(const UpdatePass& pass, const UpdateRule& rule);

  // ---- where bf16 x bf16 products run (cpu: src/cpu/bf16_kernel.h) -----------------------
  // The kernels this host offers, the default first; the one in use; switching to one (Error
  // naming `where` and what the host has when it is not offered); timing each on a
  // transformer linear's three products (the current one is kept).
  std::vector<std::string> (*bf16_kernels)();
  std::string (*current_bf16_kernel)();
  void (*use_bf16_kernel)(std::string_view name, const std::string& where);
  std::vector<Bf16KernelTiming> (*time_bf16_kernels)(int rounds);
};

// The built-in backends (defined beside their kernels: src/cpu, src/backend/reference).
const Backend& cpu_backend();
const Backend& reference_backend();

// The backend CPU tensors run on: `cpu`, or the one MIXPREC_BACKEND names (cpu, reference)
// at the first call, or the one a BackendScope selects.
const Backend& current();
// The built-in backend called `name`; an Error lists the names when there is none.
const Backend& find_backend(std::string_view name);
std::vector<std::string_view> backend_names();

// Runs the code in its scope on `b` (process-wide: for tests and tools, not for threads that
// disagree), restoring the previous backend on exit.
class BackendScope {
 public:
  explicit BackendScope(const Backend& b);
  ~BackendScope();
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  const Backend* saved_;
};

// Inside this scope gemm runs each product whole on the calling thread (set_whole_products).
class WholeProductScope {
 public:
  WholeProductScope() : saved_(current().set_whole_products(true)) {}
  ~WholeProductScope() { current().set_whole_products(saved_); }
  WholeProductScope(const WholeProductScope&) = delete;
  WholeProductScope& operator=(const WholeProductScope&) = delete;

 private:
  bool saved_;
};

}  // namespace mixprec::backend
