// Broadcasting elementwise kernels. The output is walked as rows of its innermost coalesced
// dim, in tiles of at most kMapBlock elements; every operand is, along that dim, either
// contiguous (read as a row) or broadcast (one value filled across the row buffer). So the
// same-shape case is one flat pass, a bias [D] over [N, D] reads each x row once (the bias
// row is reused while it stays the same), and any other broadcast pattern still vectorises
// along its innermost dim.
#include "mixprec/cpu/elementwise.h"

#include <string>

namespace mixprec::cpu {
namespace {

#define MIXPREC_INLINE [[gnu::always_inline]] inline

constexpr int kMaxOperands = 3;

// ---- the arithmetic, one element at a time (loops over it vectorise) ----

template <class A>
struct AddOp {
  static constexpr int kArity = 2;
  MIXPREC_INLINE A operator()(A a, A b) const { return a + b; }
};
template <class A>
struct SubOp {
  static constexpr int kArity = 2;
  MIXPREC_INLINE A operator()(A a, A b) const { return a - b; }
};
template <class A>
struct MulOp {
  static constexpr int kArity = 2;
  MIXPREC_INLINE A operator()(A a, A b) const { return a * b; }
};
template <class A>
struct DivOp {
  static constexpr int kArity = 2;
  MIXPREC_INLINE A operator()(A a, A b) const { return a / b; }
};
template <class A>
struct DivGradBOp {  // (g, a, b) -> -(g/b)·(a/b)
  static constexpr int kArity = 3;
  MIXPREC_INLINE A operator()(A g, A a, A b) const { return -(g / b) * (a / b); }
};
template <class A>
struct ScaleOp {
  static constexpr int kArity = 1;
  A s;
  MIXPREC_INLINE A operator()(A x) const { return x * s; }
};

// y[i] = op(x[0][i], ...) for i < n.
template <class A, class Op>
MIXPREC_INLINE void op_loop(const Op& op, const A* const* x, A* __restrict y, int64_t n) {
  if constexpr (Op::kArity == 1) {
    const A* __restrict x0 = x[0];
    for (int64_t i = 0; i < n; ++i) y[i] = op(x0[i]);
  } else if constexpr (Op::kArity == 2) {
    const A* __restrict x0 = x[0];
    const A* __restrict x1 = x[1];
    for (int64_t i = 0; i < n; ++i) y[i] = op(x0[i], x1[i]);
  } else {
    const A* __restrict x0 = x[0];
    const A* __restrict x1 = x[1];
    const A* __restrict x2 = x[2];
    for (int64_t i = 0; i < n; ++i) y[i] = op(x0[i], x1[i], x2[i]);
  }
}

// The f32 loop built twice: for the baseline ISA and for AVX2 (no FMA, so no contraction:
// both builds round identically and give the same bits).
template <class Op>
void op_loop_baseline(const Op& op, const float* const* x, float* y, int64_t n) {
  op_loop<float>(op, x, y, n);
}
template <class Op>
[[gnu::target("avx2")]] void op_loop_avx2(const Op& op, const float* const* x, float* y,
                                          int64_t n) {
  op_loop<float>(op, x, y, n);
}

// ---- broadcast geometry ----

// The output's dims with size-1 dims dropped and neighbours merged wherever every operand
// walks them as one run; strides are per operand (0 = broadcast along that dim).
struct Plan {
  Shape dims;  // at least one dim; the last is the row the tiles run along
  std::array<Shape, kMaxOperands> strides;
};

Plan make_plan(const Shape& out, const std::vector<const Tensor*>& in, const char* where) {
  const std::size_t nd = out.size();
  std::vector<Shape> full(in.size(), Shape(nd, 0));  // per operand, per output dim
  for (std::size_t k = 0; k < in.size(); ++k) {
    const Shape& s = in[k]->shape();
    MIXPREC_CHECK(s.size() <= nd, where,
                  shape_to_string(s) + " does not broadcast to " + shape_to_string(out));
    int64_t stride = 1;
    for (std::size_t d = s.size(); d-- > 0;) {
      const std::size_t od = nd - s.size() + d;
      MIXPREC_CHECK(s[d] == out[od] || s[d] == 1, where,
                    shape_to_string(s) + " does not broadcast to " + shape_to_string(out));
      if (s[d] != 1) full[k][od] = stride;
      stride *= s[d];
    }
  }
  Plan p;
  for (std::size_t d = 0; d < nd; ++d) {
    if (out[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (std::size_t k = 0; k < in.size() && merge; ++k)
      merge = p.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      p.dims.back() *= out[d];
      for (std::size_t k = 0; k < in.size(); ++k) p.strides[k].back() = full[k][d];
    } else {
      p.dims.push_back(out[d]);
      for (std::size_t k = 0; k < in.size(); ++k) p.strides[k].push_back(full[k][d]);
    }
  }
  if (p.dims.empty()) {  // every dim is 1: one element
    p.dims.push_back(1);
    for (std::size_t k = 0; k < in.size(); ++k) p.strides[k].push_back(0);
  }
  return p;
}

// Runs op over the output in tiles (one row segment of at most kMapBlock elements each).
// `loop(x, y, len)` computes one tile from the operand rows x into y.
template <class A, std::size_t NI, class Loop>
void run_tiles(const Plan& p, const std::array<Tensor, NI>& in, Tensor& out, Loop&& loop) {
  constexpr DType kA = std::is_same_v<A, float> ? DType::f32 : DType::f64;
  const int outer_dims = static_cast<int>(p.dims.size()) - 1;
  const int64_t inner = p.dims.back();
  const int64_t width = std::min(inner, kMapBlock);
  const int64_t tiles_per_row = (inner + width - 1) / width;
  const int64_t tiles = out.numel() / inner * tiles_per_row;
  char* const out_base = static_cast<char*>(out.raw_data());
  const auto out_esz = static_cast<int64_t>(out.element_size());

  parallel_for(tiles, std::max<int64_t>(1, kMapChunk / width), [&](int64_t t0, int64_t t1) {
    std::vector<A> buf((NI + 1) * static_cast<std::size_t>(width));  // NI + 1 rows [width]
    // Row index of tile t0 as a multi-index over the outer dims, and each operand's offset.
    int64_t row = t0 / tiles_per_row, col_tile = t0 % tiles_per_row;
    Shape idx(static_cast<std::size_t>(std::max(outer_dims, 0)), 0);
    std::array<int64_t, NI> off{};
    for (int64_t rest = row, d = outer_dims - 1; d >= 0; --d) {
      const auto ud = static_cast<std::size_t>(d);
      idx[ud] = rest % p.dims[ud];
      rest /= p.dims[ud];
      for (std::size_t k = 0; k < NI; ++k) off[k] += idx[ud] * p.strides[k][ud];
    }
    std::array<int64_t, NI> cached;  // operand offset whose row the buffer holds (-1: none)
    cached.fill(-1);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c0 = col_tile * width, len = std::min(width, inner - c0);
      std::array<const A*, NI> x{};
      for (std::size_t k = 0; k < NI; ++k) {
        A* row_buf = buf.data() + k * static_cast<std::size_t>(width);
        const DType dt = in[k].dtype();
        const char* base = static_cast<const char*>(in[k].raw_data());
        const auto esz = static_cast<int64_t>(in[k].element_size());
        if (p.strides[k].back() == 0) {  // broadcast along the row: one value, filled
          if (cached[k] != off[k]) {
            A v;
            load_block<A>(dt, base + off[k] * esz, &v, 1);
            std::fill(row_buf, row_buf + width, v);
            cached[k] = off[k];
          }
          x[k] = row_buf;
        } else if (dt == kA) {
          x[k] = reinterpret_cast<const A*>(base) + off[k] + c0;
        } else {
          // A whole row already loaded (tiles_per_row == 1) is reused, e.g. a bias row.
          if (tiles_per_row != 1 || cached[k] != off[k])
            load_block<A>(dt, base + (off[k] + c0) * esz, row_buf, len);
          cached[k] = tiles_per_row == 1 ? off[k] : -1;
          x[k] = row_buf;
        }
      }
      const int64_t out_off = row * inner + c0;
      A* y = out.dtype() == kA ? reinterpret_cast<A*>(out_base) + out_off
                               : buf.data() + NI * static_cast<std::size_t>(width);
      loop(x.data(), y, len);
      if (out.dtype() != kA) store_block<A>(y, out.dtype(), out_base + out_off * out_esz, len);
      if (++col_tile == tiles_per_row) {  // next row: carry through the outer multi-index
        col_tile = 0;
        ++row;
        for (int d = outer_dims - 1; d >= 0; --d) {
          const auto ud = static_cast<std::size_t>(d);
          ++idx[ud];
          for (std::size_t k = 0; k < NI; ++k) off[k] += p.strides[k][ud];
          if (idx[ud] < p.dims[ud]) break;
          for (std::size_t k = 0; k < NI; ++k) off[k] -= p.strides[k][ud] * p.dims[ud];
          idx[ud] = 0;
        }
      }
    }
  });
}

// out (new, `shape`, out_dtype) = Op<A>(operands...), A the compute type.
template <template <class> class Op, std::size_t NI, class... Params>
Tensor map_broadcast(const char* where, const std::array<Tensor, NI>& operands, const Shape& shape,
                     DType out_dtype, Isa isa, Params... params) {
  std::array<Tensor, NI> in;
  std::vector<const Tensor*> ptrs;
  std::vector<DType> dtypes{out_dtype};
  for (std::size_t k = 0; k < NI; ++k) {
    check_floating(where, operands[k], "operand");
    in[k] = kernel_input(operands[k]);
    ptrs.push_back(&in[k]);
  }
  check_compute_dtype(where, out_dtype);
  const Plan plan = make_plan(shape, ptrs, where);
  Tensor out = Tensor::empty(shape, out_dtype);
  if (out.numel() == 0) return out;
  bool f64 = out_dtype == DType::f64;
  for (const Tensor& t : in) f64 = f64 || t.dtype() == DType::f64;
  if (f64) {
    const Op<double> op{static_cast<double>(params)...};
    run_tiles<double>(plan, in, out, [&](const double* const* x, double* y, int64_t n) {
      op_loop<double>(op, x, y, n);
    });
  } else {
    const Op<float> op{static_cast<float>(params)...};
    // Memory-bound: the AVX2 build serves AVX-512 CPUs too.
    const auto loop =
        vec_isa(isa) != VecIsa::baseline ? op_loop_avx2<Op<float>> : op_loop_baseline<Op<float>>;
    run_tiles<float>(plan, in, out,
                     [&](const float* const* x, float* y, int64_t n) { loop(op, x, y, n); });
  }
  return out;
}

}  // namespace

VecIsa vec_isa(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return VecIsa::baseline;
    case Isa::avx2:
      MIXPREC_CHECK(cpu_has_avx2_f16c(), "cpu kernels", "AVX2 kernels requested on a CPU without");
      return VecIsa::avx2;
    case Isa::best:
      break;
  }
  return cpu_has_avx512f() ? VecIsa::avx512 : cpu_has_avx2_f16c() ? VecIsa::avx2 : VecIsa::baseline;
}

Tensor kernel_input(const Tensor& t) {
  return t.detach().contiguous();
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape, DType out_dtype,
              Isa isa) {
  const std::array<Tensor, 2> in{a, b};
  switch (op) {
    case BinaryOp::add:
      return map_broadcast<AddOp>("add", in, shape, out_dtype, isa);
    case BinaryOp::sub:
      return map_broadcast<SubOp>("sub", in, shape, out_dtype, isa);
    case BinaryOp::mul:
      return map_broadcast<MulOp>("mul", in, shape, out_dtype, isa);
    case BinaryOp::div:
      return map_broadcast<DivOp>("div", in, shape, out_dtype, isa);
  }
  throw Error("binary", "invalid op " + std::to_string(static_cast<int>(op)));
}

Tensor div_grad_b(const Tensor& g, const Tensor& a, const Tensor& b, DType out_dtype, Isa isa) {
  check_floating("div backward", g, "gradient");
  return map_broadcast<DivGradBOp>("div backward", std::array<Tensor, 3>{g, a, b}, g.shape(),
                                   out_dtype, isa);
}

Tensor scale(const Tensor& x, double s, DType out_dtype, Isa isa) {
  check_floating("scale", x, "input");
  // s is rounded to f32 for f32 math (and kept whole for f64): Op<float>{float(s)}.
  return map_broadcast<ScaleOp>("scale", std::array<Tensor, 1>{x}, x.shape(), out_dtype, isa, s);
}

}  // namespace mixprec::cpu
