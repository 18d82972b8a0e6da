// The vocabulary of the kernel backends: argument and result types every backend's kernels
// share (backend.h lists the kernels). Plain data, no compute, so ops, autograd, amp and
// optim can hold these values without depending on any one backend.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include "mixprec/tensor/tensor.h"

namespace mixprec::backend {

// ---- argument checks the kernels and the ops share ------------------------------------------

// The dtype a kernel computes in for these operand/result dtypes: f64 if any is f64, else f32.
DType compute_dtype(std::initializer_list<DType> dtypes);
// Throws naming `op` unless t is a defined, non-meta tensor of a floating dtype.
void check_floating(const char* op, const Tensor& t, const char* what);
// Throws naming `op` unless kernels compute in `dtype` (f64, f32, bf16 or f16).
void check_compute_dtype(const char* op, DType dtype);

// ---- elementwise ----------------------------------------------------------------------------

enum class BinaryOp : uint8_t { add, sub, mul, div };
enum class Activation : uint8_t { gelu, gelu_tanh, silu };

// The pointwise math functions (ops/pointwise.h) with their parameters: pow's exponent,
// softplus's beta and threshold (torch.nn.functional.softplus: x where beta·x > threshold).
enum class PointwiseOp : uint8_t {
  exp,
  log,
  log1p,
  expm1,
  sqrt,
  rsqrt,
  reciprocal,
  tanh,
  softplus,
  pow
};
struct Pointwise {
  PointwiseOp op;
  double exponent = 1.0;
  double beta = 1.0, threshold = 20.0;
};
// Each op's name (its row in the autocast table) and its autograd node's name, by enum value.
struct PointwiseNames {
  const char* op;
  const char* backward;
};
inline constexpr PointwiseNames kPointwiseNames[] = {
    {"exp", "ExpBackward"},
    {"log", "LogBackward"},
    {"log1p", "Log1pBackward"},
    {"expm1", "Expm1Backward"},
    {"sqrt", "SqrtBackward"},
    {"rsqrt", "RsqrtBackward"},
    {"reciprocal", "ReciprocalBackward"},
    {"tanh", "TanhBackward"},
    {"softplus", "SoftplusBackward"},
    {"pow", "PowBackward"},
};
static_assert(std::size(kPointwiseNames) == static_cast<std::size_t>(PointwiseOp::pow) + 1);
constexpr const char* pointwise_name(PointwiseOp op) {
  return kPointwiseNames[static_cast<std::size_t>(op)].op;
}

// ---- GEMM -----------------------------------------------------------------------------------

struct GemmOperand {
  DType dtype;
  const void* data;
  int64_t ld;                // elements between rows as stored
  bool trans = false;        // stored as op(X)ᵀ
  int64_t batch_stride = 0;  // elements between consecutive matrices of a batch
};

struct GemmOutput {
  DType dtype;
  void* data;
  int64_t ld;
  int64_t batch_stride = 0;
  // Optional [n] vector of C's dtype added to every row of every matrix (C = ... + bias),
  // inside the accumulation: a linear layer's bias costs no extra pass or rounding.
  const void* row_bias = nullptr;
};

// ---- reductions -----------------------------------------------------------------------------

// The length of a tensor's last dim, 1 for a scalar: the rows the softmax and norm kernels of
// every backend work on.
inline int64_t last_dim(const Tensor& x) {
  return x.ndim() == 0 ? 1 : x.size(-1);
}

// A contiguous tensor seen as [outer, n, inner], n the reduced (or indexed) dim.
struct ReduceGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};
// The geometry of reducing `shape` over `dim` (already normalized; a 0-d shape reduces as [1]).
ReduceGeometry reduce_geometry(const Shape& shape, int dim);
// The dtype reductions and scatters accumulate in: f64 for f64, else f32.
DType reduce_acc_dtype(DType dtype);

enum class ReduceOp { sum, mean, norm };  // sum; sum / n; sqrt(sum of squares)

// Ops along n of [outer, n, inner] (ops/reduction.h): prod, logsumexp and the p-norms reduce
// n away (pnorm: (Σ|x|^p)^(1/p), p finite >= 1; inf_norm: max |x|); cumsum keeps it.
enum class LineOp : uint8_t { prod, logsumexp, pnorm, inf_norm, cumsum };
struct LineFunction {
  LineOp op;
  double p = 1.0;  // pnorm's order
};
// Each op's autograd node name, by enum value.
inline constexpr const char* kLineBackwardNames[] = {
    "ProdBackward", "LogsumexpBackward", "NormBackward", "NormBackward", "CumsumBackward"};
static_assert(std::size(kLineBackwardNames) == static_cast<std::size_t>(LineOp::cumsum) + 1);

// ---- elementwise functions of two tensors ---------------------------------------------------
// f(x, t) per element with both partial derivatives: the loss terms of ops/loss.h, mse (x-t)²,
// l1 |x-t|, smooth_l1 (beta), kl_div t·(log t - x) (kl_div_log_target: e^t·(t - x)),
// bce_logits (with a pos_weight operand), bce on probabilities -(t·log x + (1-t)·log(1-x))
// (each log clamped at -100); and pow x^t (ops/pointwise.h).
enum class PairOp : uint8_t { mse, l1, smooth_l1, kl_div, kl_div_log_target, bce_logits, bce, pow };
struct PairFunction {
  PairOp op;
  double beta = 1.0;  // smooth_l1's threshold
};
inline constexpr const char* kPairBackwardNames[] = {"MseLossBackward",
                                                     "L1LossBackward",
                                                     "SmoothL1LossBackward",
                                                     "KlDivBackward",
                                                     "KlDivBackward",
                                                     "BinaryCrossEntropyWithLogitsBackward",
                                                     "BinaryCrossEntropyBackward",
                                                     "PowBackward"};
static_assert(std::size(kPairBackwardNames) == static_cast<std::size_t>(PairOp::pow) + 1);

// ---- normalisation, softmax, attention, cross-entropy ---------------------------------------

// Per-row statistics saved by a norm's forward pass: [rows] f32 (f64 for f64).
struct NormStats {
  Tensor mean;  // undefined for RMSNorm (which does not centre)
  Tensor rstd;  // 1 / sqrt(var + eps), var = mean(x²) for RMSNorm
};
struct NormGrads {
  Tensor dx;       // x's shape and dtype (undefined unless asked for)
  Tensor dweight;  // [D], weight's dtype, rounded once from the f32 sum
  Tensor dbias;    // [D], bias's dtype
};

// Per-row statistics softmax's backward recomputes probabilities from: [rows] f32 (f64 for
// f64). Saving these and the input, rather than the rounded output, makes a bf16 backward
// exactly the f32 backward rounded once.
struct SoftmaxStats {
  Tensor max;      // row max
  Tensor log_sum;  // log(sum(exp(x - max)))
};

struct AttentionForward {
  Tensor out;      // [B, H, T, Dh], dtype of q
  Tensor lse;      // [B, H, T], log-sum-exp of each scaled score row: f32 (f64 for f64 inputs)
  Tensor out_acc;  // [B, H, T, Dh] f32, the output before rounding (bf16/f16 q, when asked)
};
struct AttentionGrads {
  Tensor dq, dk, dv;  // [B, H, T, Dh], dtype of q
};
// True when t ([B, H, T, Dh]) has adjacent Dh elements and rows at least Dh apart: the
// layouts (a contiguous tensor, or a [B, T, H, Dh] projection seen as [B, H, T, Dh]) that
// attention kernels take in place. Other layouts are made contiguous first.
bool rows_are_dense(const Tensor& t);

struct CrossEntropyForward {
  Tensor loss;      // [] f32 (f64 for f64 logits): mean over kept rows; NaN when none is kept
  Tensor row_max;   // [N] f32/f64: max of each kept row (0 for ignored rows)
  Tensor log_sum;   // [N] f32/f64: log(sum(exp(x - max))) of each kept row
  int64_t n_valid;  // rows whose target is not ignore_index
};

// ---- mixture-of-experts rows ----------------------------------------------------------------

// Where each token's kept assignments went, in expert order: entries [start[t], start[t+1])
// are token t's (expert, row in that expert's batch, slot n·k + j).
struct TokenSlots {
  struct Entry {
    int64_t expert, row, slot;
  };
  std::vector<int64_t> start;  // [N + 1]
  std::vector<Entry> entries;  // [kept assignments]
};
struct MoeCombineGrads {
  std::vector<Tensor> dy;  // per expert [n_e, d] in the accumulate dtype
  Tensor dgate;            // [N·k] in the accumulate dtype, 0 for dropped assignments
};

// ---- gradient scans -------------------------------------------------------------------------

struct GradNumerics {
  int64_t numel = 0;
  float amax = 0;          // max |g| over finite elements
  int64_t nonfinite = 0;   // inf or NaN elements
  int64_t underflow = 0;   // finite elements with |g * scale| < underflow_below
  int64_t overflow = 0;    // finite elements with |g * scale| > overflow_above
  double sum_squares = 0;  // of finite elements, f64 (the global norm's share)
};
struct GradNumericsPass {
  std::vector<GradNumerics> per_tensor;
  // Every piece's sum of squares added in (tensor, piece) order: for finite f32, bf16 or f16
  // gradients the bits of the clipping norm's sum, so a monitor's norm is the clipping norm.
  double sum_squares = 0;
};

// ---- the fused optimizer update -------------------------------------------------------------

inline constexpr int kMaxUpdateState = 2;

// A span of an update rule's work in f32. The rule reads g[i] * inv_scale, p[i] and s[k][i],
// updates s[k][i] in place and writes p_new[i]. For an f32 master p_new == p (in place): read
// p[i] before writing p_new[i]. Rules are elementwise (begin tells where the span starts).
struct UpdateTile {
  int64_t begin;  // parameter index of element 0
  int64_t len;
  float inv_scale;
  const float* g;
  const float* p;
  std::array<float*, kMaxUpdateState> s;
  float* p_new;
};
using UpdateRule = std::function<void(const UpdateTile&)>;

struct UpdateBuffer {
  DType dtype = DType::f32;
  void* data = nullptr;  // numel contiguous elements
};

// The buffers of one parameter's update: the gradient (f32, bf16 or f16) is read; the master
// and its state (of the master's dtype) are read and rewritten; a narrow master's Kahan
// compensation (when data is set) and the working copy (when data is set) are written.
struct UpdatePass {
  int64_t numel = 0;
  float inv_scale = 1.0f;
  UpdateBuffer grad, master;
  std::array<UpdateBuffer, kMaxUpdateState> state{};
  int n_state = 0;
  UpdateBuffer kahan, working;
  // A narrow master and state are stored by stochastic rounding with these keys (element i
  // of buffer b draws at counter index_base + i of stream streams[b]; b = 0 master, 1 + k
  // state k), else rounded to nearest even.
  bool stochastic = false;
  uint64_t seed = 0;
  std::array<uint64_t, 1 + kMaxUpdateState> streams{};
  uint64_t index_base = 0;
};

// One bf16 product kernel's measured throughput (Backend::time_bf16_kernels), GFLOP/s.
struct Bf16KernelTiming {
  std::string kernel;
  double gflops = 0;  // median over the rounds
  double gflops_min = 0, gflops_max = 0;
};

}  // namespace mixprec::backend
