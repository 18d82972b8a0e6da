// The reference backend's kernels: scalar loops that read every operand as f64 (any layout,
// through Tensor::to_doubles), compute in f64, and round once into the result's dtype
// (Tensor::from_doubles). Short and obviously correct rather than fast: they are the oracle
// the op registry test holds the `cpu` kernels to. Contracts: backend.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "mixprec/backend/backend.h"

namespace mixprec::backend::reference {

// ---- helpers ---------------------------------------------------------------------------------
// Every element of t in row-major order of its shape, as f64 (t of any dtype and layout).
std::vector<double> values(const Tensor& t);
// A new contiguous tensor of `shape` holding v rounded once (nearest even) into `dtype`.
Tensor make(const std::vector<double>& v, const Shape& shape, DType dtype);
// f64 when any of the dtypes is f64, else f32: the dtype a result of accumulate-kind
// (statistics, unrounded sums) is returned in, as the cpu kernels return it.
DType stats_dtype(DType t);
// Index values of an i32/i64 tensor, row-major.
std::vector<int64_t> indices(const Tensor& t);
// For `from` broadcasting (NumPy rules) to `to`: a vector holding, for each element of `to`
// in row-major order, the row-major position of the element of `from` it repeats. Throws
// naming `where` when `from` does not broadcast to `to`.
std::vector<int64_t> broadcast_sources(const Shape& from, const Shape& to, const char* where);
// Throws naming `op`, the first index value outside [0, bound), its position and the bound.
void check_range(const std::vector<int64_t>& ix, int64_t bound, const char* op);

// ---- kernels (one per Backend entry) -----------------------------------------------------------
void gemm(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a, const GemmOperand& b,
          float beta, const GemmOutput& c, int64_t batch);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape, DType out_dtype);
Tensor div_grad_b(const Tensor& g, const Tensor& a, const Tensor& b, DType out_dtype);
Tensor scale(const Tensor& x, double s, DType out_dtype);
Quantized quantize(const Tensor& x, const QuantSpec& spec);
Tensor scaled_gemm(const Quantized& a, const Quantized& b, DType out_dtype);
Tensor activation_forward(Activation act, const Tensor& x);
Tensor pointwise_forward(const Pointwise& f, const Tensor& x);
Tensor line_forward(const LineFunction& f, const Tensor& x, ReduceGeometry g);
Tensor line_backward(const LineFunction& f, const Tensor& x, const Tensor& result,
                     const Tensor& grad, ReduceGeometry g, DType dtype);
Tensor pair_forward(const PairFunction& f, const Tensor& x, const Tensor& t,
                    const Tensor& pos_weight);
std::array<Tensor, 2> pair_backward(const PairFunction& f, const Tensor& x, const Tensor& t,
                                    const Tensor& pos_weight, const Tensor& g, bool want_x,
                                    bool want_t);
Tensor pointwise_backward(const Pointwise& f, const Tensor& x, const Tensor& g);
Tensor activation_backward(Activation act, const Tensor& x, const Tensor& g);
Tensor swiglu_forward(const Tensor& gate, const Tensor& up);
std::array<Tensor, 2> swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& g,
                                      bool want_gate, bool want_up);
Tensor dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t stream);
Tensor dropout_backward(const Tensor& g, double p, uint64_t seed, uint64_t stream, DType out_dtype);

Tensor reduce_dim(const Tensor& x, ReduceGeometry g, ReduceOp op);
Tensor reduce_expand_backward(const Tensor& grad, ReduceGeometry g, bool mean, DType dtype);
Tensor l2_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& norm, ReduceGeometry g);
std::pair<Tensor, Tensor> max_dim(const Tensor& x, ReduceGeometry g);
Tensor max_backward(const Tensor& grad, const Tensor& indices, ReduceGeometry g, DType dtype);
Tensor reduce_to_shape(const Tensor& grad, const Shape& shape, std::optional<DType> out_dtype);

Tensor norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                    bool center, NormStats& stats);
NormGrads norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                        const NormStats& stats, bool center, bool need_dx, bool need_dweight,
                        bool need_dbias);
Tensor softmax(const Tensor& x, bool log, SoftmaxStats* stats);
Tensor softmax_backward(const Tensor& x, const SoftmaxStats& stats, const Tensor& dy, bool log);
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                   double scale, bool keep_acc_out);
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  bool causal, double scale);
Tensor rope_rotate(const Tensor& x, std::span<const double> inv_freq, double factor, int64_t offset,
                   bool inverse, DType out_dtype);
Tensor embedding_forward(const Tensor& ids, const Tensor& weight);
Tensor embedding_backward(const Tensor& ids, const Tensor& dy, int64_t V, DType acc);
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                          int64_t ignore_index);
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                              const CrossEntropyForward& saved, int64_t ignore_index, double scale);

Tensor gather(const Tensor& x, int dim, const Tensor& index, const Shape& out_shape,
              const char* op);
Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src,
                   const char* op);
Tensor index_add(const Tensor& x, ReduceGeometry g, const Tensor& index, const Tensor& source,
                 double alpha, const char* op);
Tensor index_select_scaled(const Tensor& grad, ReduceGeometry g, const Tensor& index, double alpha,
                           DType dtype, const char* op);
std::pair<Tensor, Tensor> topk(const Tensor& x, ReduceGeometry g, int64_t k, bool largest);
Tensor topk_backward(const Tensor& grad, const Tensor& indices, ReduceGeometry g, int64_t k,
                     DType dtype);
Tensor concat(const std::vector<Tensor>& parts, int dim, const Shape& out_shape);

std::vector<Tensor> moe_dispatch(const Tensor& x, const std::vector<std::vector<int64_t>>& tokens);
Tensor moe_dispatch_backward(const std::vector<Tensor>& grads, const TokenSlots& slots, int64_t n,
                             int64_t d, DType acc);
Tensor moe_combine(const std::vector<Tensor>& ys, const Tensor& gates, const TokenSlots& slots,
                   int64_t n, int64_t d);
MoeCombineGrads moe_combine_backward(const Tensor& gout, const std::vector<Tensor>& ys,
                                     const Tensor& gates, const TokenSlots& slots);

void accumulate_into(const Tensor& dst, const Tensor& src);
Tensor add_same_shape(const Tensor& a, const Tensor& b);
int64_t unscale_and_check(std::span<const Tensor> gs, float inv_scale);
int64_t first_nonfinite(std::span<const Tensor> gs, float inv_scale);
void clamp_in_place(std::span<const Tensor> gs, double lo, double hi);
GradNumericsPass grad_numerics(std::span<const Tensor> gs, double scale, double underflow_below,
                               double overflow_above);
double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale);
void update(const UpdatePass& pass, const UpdateRule& rule);

}  // namespace mixprec::backend::reference
