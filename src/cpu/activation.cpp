// GELU (erf and tanh forms), SiLU and the fused SwiGLU product: forward and backward.
// f32 math runs on GCC vector-extension vectors with branch-free polynomial approximations
// (libm's erff/expf/tanhf are scalar calls and would dominate), built three times: SSE2
// (4 lanes), AVX2+FMA (8) and AVX-512F+FMA (16). f64 math uses libm and is the reference.
// bf16 / f16 tensors read tables of that f32 math over all 65536 encodings
// (activation_tables.h): the same bits, a fraction of the work.
#include "mixprec/cpu/activation.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "../numerics/vector_lanes.h"
#include "activation_tables.h"
#include "mixprec/cpu/elementwise.h"

// The vector helpers are always inlined, so the ABI of passing 32-byte vectors never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace mixprec::cpu {
namespace {

using simd::Lanes;

template <class vf>
using int_lanes = decltype(vf{} < vf{});  // int32 lanes, as comparisons return

template <class vf>
MIXPREC_INLINE vf splat(float v) {
  return vf{} + v;
}
template <class vf>
MIXPREC_INLINE vf vabs(const vf& x) {
  return reinterpret_cast<vf>(reinterpret_cast<int_lanes<vf>>(x) & 0x7FFFFFFF);
}
template <class vf>
MIXPREC_INLINE vf pow2i(const int_lanes<vf>& n) {  // 2^n for -126 <= n <= 127
  return reinterpret_cast<vf>((n + 127) << 23);
}

// e^(hi + lo) for hi <= 0 and |lo| << 1 (lo carries the low part of an argument that does
// not fit one float). Cody-Waite reduction by ln 2 and the Cephes expf polynomial: relative
// error < 1e-7 down to the f32 underflow; 0 below e^-104, subnormal results rounded once.
template <class vf>
MIXPREC_INLINE vf exp_nonpos(const vf& hi_in, const vf& lo_in) {
  using vi = int_lanes<vf>;
  const vi under = hi_in < -104.0f;
  const vf hi = under ? splat<vf>(-104.0f) : hi_in;
  const vf lo = under ? vf{} : lo_in;    // an infinite hi may come with a NaN lo
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  const vf t = hi * 1.44269504088896341f + kRound;
  const vi n = reinterpret_cast<vi>(t) - 0x4B400000;  // round(hi·log2 e), in [-150, 0]
  const vf nf = t - kRound;
  vf r = hi - nf * 0.693359375f;  // exact: ln 2's high part has 9 bits
  r = r + nf * 2.12194440e-4f + lo;
  const vf p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                  4.1665795894e-2f) *
                     r +
                 1.6666665459e-1f) *
                    r +
                5.0000001201e-1f) *
                   (r * r) +
               r + 1.0f;
  const vi n1 = n >> 1;  // 2^n in two factors so subnormal results are reached
  return p * pow2i<vf>(n1) * pow2i<vf>(n - n1);
}

// Upper Gaussian tail Q(t) = P(Z > t) and density φ(t) for t >= 0, both ~1e-7 relative.
// Q = e^(-t²/2)·R(t), R = m(t)/√(2π) with m the Mills ratio; R(t)·(4+t)/4 is smooth in
// v = 4/(4+t) and fitted (Chebyshev, degree 9, error 3e-9) for t in [0, 14.6]; beyond that
// e^(-t²/2) underflows. t² is split so its rounding does not reach the exponent: th keeps
// the top 12 significand bits of t, so th² is exact.
template <class vf>
MIXPREC_INLINE void normal_tail(const vf& t, vf& q, vf& pdf) {
  using vi = int_lanes<vf>;
  const vf th = reinterpret_cast<vf>(reinterpret_cast<vi>(t) & static_cast<int32_t>(0xFFFFF000));
  const vf tl = t - th;
  const vf e = exp_nonpos<vf>(-0.5f * th * th, -(th + 0.5f * tl) * tl);
  const vf d = 1.0f / (4.0f + t);
  const vf w = d * 10.1917808219f - 1.54794520548f;  // v mapped onto [-1, 1]
  vf h = 3.49317358094e-6f * w + 1.55883113248e-5f;
  h = h * w - 4.72814092903e-5f;
  h = h * w - 3.23419379206e-4f;
  h = h * w + 1.19079992262e-4f;
  h = h * w + 6.22077653722e-3f;
  h = h * w + 2.91578090962e-2f;
  h = h * w + 8.08464714072e-2f;
  h = h * w + 1.57530648337e-1f;
  h = h * w + 2.26476836528e-1f;
  q = e * (4.0f * d) * h;
  pdf = e * 0.398942280401432678f;  // 1/√(2π)
}

// σ(v), and σ(v)·(1 - σ(v)) = e/(1+e)² with e = e^-|v| (no cancellation, no overflow).
template <class vf>
MIXPREC_INLINE vf sigmoid(const vf& v, vf& slope) {
  const vf e = exp_nonpos<vf>(-vabs(v), vf{});
  const vf d = 1.0f / (1.0f + e);
  slope = e * d * d;
  return v >= 0.0f ? d : e * d;
}

constexpr float kTanhK = 1.5957691216057308f;  // 2·√(2/π): σ(2u) = (1 + tanh u)/2
constexpr float kTanhC = 0.044715f;
constexpr double kTanhC64 = 0.044715;

// ---- the ops: vec() on 8 lanes of f32, f64() on one element of f64 ----

struct GeluFwd {
  static constexpr int kIn = 1, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf q, pdf;
    normal_tail(vabs(x[0]), q, pdf);
    y[0] = x[0] * (x[0] >= 0.0f ? 1.0f - q : q);
  }
  static void f64(const double* x, double* y) {
    y[0] = x[0] * 0.5 * std::erfc(-x[0] * std::numbers::sqrt2 / 2);
  }
};
struct GeluBwd {  // (x, g) -> g·(Φ(x) + x·φ(x))
  static constexpr int kIn = 2, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf q, pdf;
    normal_tail(vabs(x[0]), q, pdf);
    y[0] = x[1] * ((x[0] >= 0.0f ? 1.0f - q : q) + x[0] * pdf);
  }
  static void f64(const double* x, double* y) {
    const double cdf = 0.5 * std::erfc(-x[0] * std::numbers::sqrt2 / 2);
    const double pdf =
        std::exp(-0.5 * x[0] * x[0]) * std::numbers::inv_sqrtpi / std::numbers::sqrt2;
    y[0] = x[1] * (cdf + x[0] * pdf);
  }
};

double sigmoid_f64(double v, double& slope) {
  const double e = std::exp(-std::fabs(v)), d = 1.0 / (1.0 + e);
  slope = e * d * d;
  return v >= 0 ? d : e * d;
}

struct GeluTanhFwd {
  static constexpr int kIn = 1, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    y[0] = x[0] * sigmoid(kTanhK * x[0] * (1.0f + kTanhC * (x[0] * x[0])), slope);
  }
  static void f64(const double* x, double* y) {
    double slope;
    const double k = 2 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi, c = kTanhC64;
    y[0] = x[0] * sigmoid_f64(k * x[0] * (1 + c * x[0] * x[0]), slope);
  }
};
struct GeluTanhBwd {  // d/dx x·σ(v) = σ + x·σ(1-σ)·v', v = k·x·(1 + c·x²)
  static constexpr int kIn = 2, kOut = 1;
  // x·v' overflows for huge |x| where σ(1-σ) is already 0: clamping x there keeps 0·inf
  // from turning the (zero) second term into NaN. NaN passes through the clamp.
  static constexpr float kClamp = 1e6f;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    const vf s = sigmoid(kTanhK * x[0] * (1.0f + kTanhC * (x[0] * x[0])), slope);
    const vf xc = x[0] < -kClamp ? splat<vf>(-kClamp) : x[0] > kClamp ? splat<vf>(kClamp) : x[0];
    const vf x2 = xc * xc;
    y[0] = x[1] * (s + xc * slope * (kTanhK * (1.0f + 3.0f * kTanhC * x2)));
  }
  static void f64(const double* x, double* y) {
    const double k = 2 * std::numbers::sqrt2 * std::numbers::inv_sqrtpi, c = kTanhC64;
    double slope;
    const double s = sigmoid_f64(k * x[0] * (1 + c * x[0] * x[0]), slope);
    const double xc = x[0] < -kClamp ? -kClamp : x[0] > kClamp ? kClamp : x[0];
    y[0] = x[1] * (s + xc * slope * k * (1 + 3 * c * xc * xc));
  }
};

struct SiluFwd {
  static constexpr int kIn = 1, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    y[0] = x[0] * sigmoid(x[0], slope);
  }
  static void f64(const double* x, double* y) {
    double slope;
    y[0] = x[0] * sigmoid_f64(x[0], slope);
  }
};
struct SiluBwd {  // (x, g) -> g·(σ + x·σ(1-σ))
  static constexpr int kIn = 2, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    const vf s = sigmoid(x[0], slope);
    y[0] = x[1] * (s + x[0] * slope);
  }
  static void f64(const double* x, double* y) {
    double slope;
    const double s = sigmoid_f64(x[0], slope);
    y[0] = x[1] * (s + x[0] * slope);
  }
};

struct SwigluFwd {  // (gate, up) -> silu(gate)·up
  static constexpr int kIn = 2, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    y[0] = x[0] * sigmoid(x[0], slope) * x[1];
  }
  static void f64(const double* x, double* y) {
    double slope;
    y[0] = x[0] * sigmoid_f64(x[0], slope) * x[1];
  }
};
struct SwigluBwd {  // (gate, up, g) -> (g·up·silu'(gate), g·silu(gate))
  static constexpr int kIn = 3, kOut = 2;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    const vf s = sigmoid(x[0], slope);
    y[0] = x[2] * x[1] * (s + x[0] * slope);
    y[1] = x[2] * (x[0] * s);
  }
  static void f64(const double* x, double* y) {
    double slope;
    const double s = sigmoid_f64(x[0], slope);
    y[0] = x[2] * x[1] * (s + x[0] * slope);
    y[1] = x[2] * (x[0] * s);
  }
};
struct SwigluBwdGate {  // (gate, up, g) -> g·up·silu'(gate)
  static constexpr int kIn = 3, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    const vf s = sigmoid(x[0], slope);
    y[0] = x[2] * x[1] * (s + x[0] * slope);
  }
  static void f64(const double* x, double* y) {
    double slope;
    const double s = sigmoid_f64(x[0], slope);
    y[0] = x[2] * x[1] * (s + x[0] * slope);
  }
};
struct SwigluBwdUp {  // (gate, g) -> g·silu(gate)
  static constexpr int kIn = 2, kOut = 1;
  template <class vf>
  MIXPREC_INLINE static void vec(const vf* x, vf* y) {
    vf slope;
    y[0] = x[1] * (x[0] * sigmoid(x[0], slope));
  }
  static void f64(const double* x, double* y) {
    double slope;
    y[0] = x[1] * (x[0] * sigmoid_f64(x[0], slope));
  }
};

// ---- runners ----

// Elements ahead of the loads to prefetch: the math per vector is long enough that the
// out-of-order window alone does not cover the latency of the next cache lines.
constexpr int64_t kPrefetchAhead = 1024;

// Whole vectors of L lanes, then the tail through zero-padded vectors. (bf16 / f16 never
// come here: they read tables this code filled, activation_tables.h.)
template <class Op, int L>
MIXPREC_INLINE void run_vec(const float* const* x, float* const* y, int64_t n) {
  using vf = typename Lanes<L>::vf;
  vf a[Op::kIn], r[Op::kOut];  // one vector [L] per input / output
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (int k = 0; k < Op::kIn; ++k) __builtin_prefetch(x[k] + i + kPrefetchAhead);
    for (int k = 0; k < Op::kIn; ++k) std::memcpy(&a[k], x[k] + i, sizeof(vf));
    Op::vec(a, r);
    for (int k = 0; k < Op::kOut; ++k) std::memcpy(y[k] + i, &r[k], sizeof(vf));
  }
  if (i < n) {
    const auto bytes = static_cast<std::size_t>(n - i) * sizeof(float);
    float pad[L] = {};  // [L] one tail vector
    for (int k = 0; k < Op::kIn; ++k) {
      std::memcpy(pad, x[k] + i, bytes);
      std::memcpy(&a[k], pad, sizeof(vf));
    }
    Op::vec(a, r);
    for (int k = 0; k < Op::kOut; ++k) std::memcpy(y[k] + i, &r[k], bytes);
  }
}

// The three builds: SSE2 (4 lanes), AVX2+FMA (8), AVX-512+FMA (16). The FMA builds contract
// a·b + c the same way and give the same bits; the SSE2 build rounds products separately.
using BlockFn = void (*)(const float* const*, float* const*, int64_t);
template <class Op>
void block_baseline(const float* const* x, float* const* y, int64_t n) {
  run_vec<Op, 4>(x, y, n);
}
template <class Op>
[[gnu::target("avx2,fma,f16c"), gnu::flatten]] void block_avx2(const float* const* x,
                                                               float* const* y, int64_t n) {
  run_vec<Op, 8>(x, y, n);
}
template <class Op>
[[gnu::target("avx512f,avx2,fma,f16c"), gnu::flatten]] void block_avx512(const float* const* x,
                                                                         float* const* y,
                                                                         int64_t n) {
  run_vec<Op, 16>(x, y, n);
}
template <class Op>
BlockFn pick_block(VecIsa isa) {
  switch (isa) {
    case VecIsa::avx512:
      return block_avx512<Op>;
    case VecIsa::avx2:
      return block_avx2<Op>;
    case VecIsa::baseline:
      break;
  }
  return block_baseline<Op>;
}

template <class Op>
void run_f64(const double* const* x, double* const* y, int64_t n) {
  double a[Op::kIn], r[Op::kOut];  // one element per input / output
  for (int64_t i = 0; i < n; ++i) {
    for (int k = 0; k < Op::kIn; ++k) a[k] = x[k][i];
    Op::f64(a, r);
    for (int k = 0; k < Op::kOut; ++k) y[k][i] = r[k];
  }
}

// Runs Op over n elements: in f64 when any operand is f64, else in f32 with the `isa` build.
template <class Op>
void run_op(int64_t n, const std::array<MapIn, Op::kIn>& in,
            const std::array<MapOut, Op::kOut>& out, Isa isa) {
  bool f64 = false;
  for (const MapIn& m : in) f64 = f64 || m.dtype == DType::f64;
  for (const MapOut& m : out) f64 = f64 || m.dtype == DType::f64;
  if (f64) {
    map_flat<double>(n, in, out,
                     [](const double* const* x, double* const* y, int64_t len, int64_t) {
                       run_f64<Op>(x, y, len);
                     });
  } else {
    const BlockFn block = pick_block<Op>(vec_isa(isa));
    map_flat<float>(n, in, out,
                    [block](const float* const* x, float* const* y, int64_t len, int64_t) {
                      block(x, y, len);
                    });
  }
}

// ---- bf16 / f16 by table lookup (activation_tables.h): the same bits as widening, running
// the f32 kernel and rounding once ----

// The f32 kernel of Op's `isa` build over n inputs, as the table builder wants it: forward ops
// give f(x); backward ops (x, g) -> g·D(x) run with g = 1 give D(x).
template <class Op>
void tabulated(VecIsa isa, const float* x, float* y, int64_t n) {
  static_assert(Op::kOut == 1 && (Op::kIn == 1 || Op::kIn == 2));
  std::vector<float> ones(Op::kIn == 2 ? static_cast<std::size_t>(n) : 0, 1.0f);
  const float* in[2] = {x, ones.data()};
  float* out[1] = {y};
  pick_block<Op>(isa)(in, out, n);
}

struct ActTables {
  lookup::Fn value, slope;
  lookup::F32Kernel value_kernel, slope_kernel;
};
ActTables tables_of(Activation act) {
  switch (act) {
    case Activation::gelu:
      return {lookup::Fn::gelu, lookup::Fn::gelu_slope, tabulated<GeluFwd>, tabulated<GeluBwd>};
    case Activation::gelu_tanh:
      return {lookup::Fn::gelu_tanh, lookup::Fn::gelu_tanh_slope, tabulated<GeluTanhFwd>,
              tabulated<GeluTanhBwd>};
    case Activation::silu:
      break;
  }
  return {lookup::Fn::silu, lookup::Fn::silu_slope, tabulated<SiluFwd>, tabulated<SiluBwd>};
}

// Byte offset of element i of a 16-bit tensor.
const void* at(const Tensor& t, int64_t i) {
  return static_cast<const uint16_t*>(t.raw_data()) + i;
}
void* at(Tensor& t, int64_t i) {
  return static_cast<uint16_t*>(t.raw_data()) + i;
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b, const char* what) {
  MIXPREC_CHECK(a.shape() == b.shape(), op,
                std::string(what) + " has shape " + shape_to_string(b.shape()) + ", expected " +
                    shape_to_string(a.shape()));
}

const char* act_name(Activation act) {
  switch (act) {
    case Activation::gelu:
      return "gelu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::silu:
      return "silu";
  }
  return "activation";
}

}  // namespace

Tensor activation_forward(Activation act, const Tensor& x_in, Isa isa) {
  const char* name = act_name(act);
  check_floating(name, x_in, "input");
  check_compute_dtype(name, x_in.dtype());
  const Tensor x = kernel_input(x_in);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  if (lookup::has_tables(x.dtype())) {
    const VecIsa vi = vec_isa(isa);
    const ActTables t = tables_of(act);
    const uint16_t* table = lookup::rounded_table(t.value, x.dtype(), vi, t.value_kernel);
    parallel_for(x.numel(), kMapChunk, [&](int64_t b, int64_t e) {
      lookup::map(x.dtype(), vi, table, at(x, b), at(y, b), e - b);
    });
    return y;
  }
  const std::array<MapIn, 1> in{{{x.dtype(), x.raw_data()}}};
  const std::array<MapOut, 1> out{{{y.dtype(), y.raw_data()}}};
  switch (act) {
    case Activation::gelu:
      run_op<GeluFwd>(x.numel(), in, out, isa);
      break;
    case Activation::gelu_tanh:
      run_op<GeluTanhFwd>(x.numel(), in, out, isa);
      break;
    case Activation::silu:
      run_op<SiluFwd>(x.numel(), in, out, isa);
      break;
  }
  return y;
}

Tensor activation_backward(Activation act, const Tensor& x_in, const Tensor& g_in, Isa isa) {
  const char* name = act_name(act);
  check_floating(name, x_in, "input");
  check_floating(name, g_in, "gradient");
  check_compute_dtype(name, x_in.dtype());
  check_same_shape(name, x_in, g_in, "gradient");
  const Tensor x = kernel_input(x_in), g = kernel_input(g_in);
  Tensor dx = Tensor::empty(x.shape(), x.dtype());
  if (lookup::has_tables(x.dtype()) && g.dtype() == x.dtype()) {
    const VecIsa vi = vec_isa(isa);
    const ActTables t = tables_of(act);
    const float* table = lookup::f32_table(t.slope, x.dtype(), vi, t.slope_kernel);
    parallel_for(x.numel(), kMapChunk, [&](int64_t b, int64_t e) {
      lookup::scale(x.dtype(), vi, table, at(x, b), at(g, b), at(dx, b), e - b);
    });
    return dx;
  }
  const std::array<MapIn, 2> in{{{x.dtype(), x.raw_data()}, {g.dtype(), g.raw_data()}}};
  const std::array<MapOut, 1> out{{{dx.dtype(), dx.raw_data()}}};
  switch (act) {
    case Activation::gelu:
      run_op<GeluBwd>(x.numel(), in, out, isa);
      break;
    case Activation::gelu_tanh:
      run_op<GeluTanhBwd>(x.numel(), in, out, isa);
      break;
    case Activation::silu:
      run_op<SiluBwd>(x.numel(), in, out, isa);
      break;
  }
  return dx;
}

Tensor swiglu_forward(const Tensor& gate_in, const Tensor& up_in, Isa isa) {
  check_floating("swiglu", gate_in, "gate");
  check_floating("swiglu", up_in, "up");
  check_compute_dtype("swiglu", gate_in.dtype());
  check_compute_dtype("swiglu", up_in.dtype());
  check_same_shape("swiglu", gate_in, up_in, "up");
  const Tensor gate = kernel_input(gate_in), up = kernel_input(up_in);
  const DType out_dtype = promote(gate.dtype(), up.dtype());
  Tensor y = Tensor::empty(gate.shape(), out_dtype);
  if (lookup::has_tables(gate.dtype()) && up.dtype() == gate.dtype()) {  // silu(gate)·up
    const VecIsa vi = vec_isa(isa);
    const float* silu = lookup::f32_table(lookup::Fn::silu, gate.dtype(), vi, tabulated<SiluFwd>);
    parallel_for(gate.numel(), kMapChunk, [&](int64_t b, int64_t e) {
      lookup::scale(gate.dtype(), vi, silu, at(gate, b), at(up, b), at(y, b), e - b);
    });
    return y;
  }
  run_op<SwigluFwd>(gate.numel(), {{{gate.dtype(), gate.raw_data()}, {up.dtype(), up.raw_data()}}},
                    {{{y.dtype(), y.raw_data()}}}, isa);
  return y;
}

std::array<Tensor, 2> swiglu_backward(const Tensor& gate_in, const Tensor& up_in,
                                      const Tensor& g_in, bool want_gate, bool want_up, Isa isa) {
  check_floating("swiglu backward", gate_in, "gate");
  check_floating("swiglu backward", up_in, "up");
  check_floating("swiglu backward", g_in, "gradient");
  check_compute_dtype("swiglu backward", gate_in.dtype());
  check_compute_dtype("swiglu backward", up_in.dtype());
  check_same_shape("swiglu backward", gate_in, up_in, "up");
  check_same_shape("swiglu backward", gate_in, g_in, "gradient");
  const Tensor gate = kernel_input(gate_in), up = kernel_input(up_in), g = kernel_input(g_in);
  const int64_t n = gate.numel();
  Tensor dgate = want_gate ? Tensor::empty(gate.shape(), gate.dtype()) : Tensor();
  Tensor dup = want_up ? Tensor::empty(up.shape(), up.dtype()) : Tensor();
  const DType dt = gate.dtype();
  if (lookup::has_tables(dt) && up.dtype() == dt && g.dtype() == dt) {
    // dgate = (g·up)·silu'(gate), dup = g·silu(gate).
    const VecIsa vi = vec_isa(isa);
    const float* slope =
        want_gate ? lookup::f32_table(lookup::Fn::silu_slope, dt, vi, tabulated<SiluBwd>) : nullptr;
    const float* silu =
        want_up ? lookup::f32_table(lookup::Fn::silu, dt, vi, tabulated<SiluFwd>) : nullptr;
    parallel_for(n, kMapChunk, [&](int64_t b, int64_t e) {
      if (want_gate)
        lookup::scale_product(dt, vi, slope, at(gate, b), at(g, b), at(up, b), at(dgate, b), e - b);
      if (want_up) lookup::scale(dt, vi, silu, at(gate, b), at(g, b), at(dup, b), e - b);
    });
    return {dgate, dup};
  }
  const MapIn gate_m{gate.dtype(), gate.raw_data()}, up_m{up.dtype(), up.raw_data()},
      g_m{g.dtype(), g.raw_data()};
  if (want_gate && want_up)
    run_op<SwigluBwd>(n, {gate_m, up_m, g_m},
                      {{{dgate.dtype(), dgate.raw_data()}, {dup.dtype(), dup.raw_data()}}}, isa);
  else if (want_gate)
    run_op<SwigluBwdGate>(n, {gate_m, up_m, g_m}, {{{dgate.dtype(), dgate.raw_data()}}}, isa);
  else if (want_up)
    run_op<SwigluBwdUp>(n, {gate_m, g_m}, {{{dup.dtype(), dup.raw_data()}}}, isa);
  return {dgate, dup};
}

}  // namespace mixprec::cpu
