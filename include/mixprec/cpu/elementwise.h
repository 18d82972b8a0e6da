// Elementwise kernels. Operands come in any floating dtype and layout; a block of each is
// widened to f32 (f64 when an operand or the result is f64) in an L1-sized buffer, the math
// runs on the block, and the result is rounded once into the output dtype. Blocks are fixed
// slices of the output, so results never depend on the thread count (no reductions here).
// map_flat is the block runner the same-shape kernels (activations, dropout) share.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>
#include "mixprec/backend/kernel_types.h"

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::cpu {

using backend::BinaryOp;

// out = a op b, both broadcast (NumPy rules) to `shape`, as a new contiguous tensor of
// `out_dtype` (f64, f32, bf16 or f16). Throws when an operand does not broadcast to `shape`.
// `isa` picks the vector code (Isa::scalar: portable SSE2 build; both give the same bits).
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& shape, DType out_dtype,
              Isa isa = Isa::best);
// -g·a/b², computed as -(g/b)·(a/b) so b² cannot overflow: the gradient of a/b with respect
// to b before the sum over broadcast dims. All three broadcast to `shape` (g's shape).
Tensor div_grad_b(const Tensor& g, const Tensor& a, const Tensor& b, DType out_dtype,
                  Isa isa = Isa::best);
// x·s, with s rounded to f32 first (kept in f64 when x or the result is f64).
Tensor scale(const Tensor& x, double s, DType out_dtype, Isa isa = Isa::best);

using backend::check_compute_dtype;
using backend::check_floating;
using backend::compute_dtype;
// t detached and contiguous (copied only when needed): the form kernels read.
Tensor kernel_input(const Tensor& t);

// ---- block runner for same-shape kernels ----------------------------------------------------

inline constexpr int64_t kMapBlock = 1024;     // elements per row buffer: 4 KiB of f32
inline constexpr int64_t kMapChunk = 1 << 15;  // elements per parallel task (fixed boundaries)

struct MapIn {
  DType dtype;
  const void* data;  // n contiguous elements
};
struct MapOut {
  DType dtype;
  void* data;  // n contiguous elements, not overlapping any input
};

template <class A>
inline void load_block(DType dtype, const void* src, A* dst, int64_t n) {
  if constexpr (std::is_same_v<A, float>)
    widen_row_f32(dtype, src, dst, static_cast<std::size_t>(n));
  else
    widen_to_f64(dtype, src, dst, static_cast<std::size_t>(n));
}

template <class A>
inline void store_block(const A* src, DType dtype, void* dst, int64_t n) {
  if constexpr (std::is_same_v<A, float>)
    narrow_row_f32(src, dtype, dst, static_cast<std::size_t>(n));
  else
    convert_from_f64(src, dtype, dst, static_cast<std::size_t>(n));
}

// For each block [first, first + len) of [0, n) (first a multiple of kMapBlock, len <=
// kMapBlock): calls block(x, y, len, first) where x[k] holds input k's elements widened to A
// (f32 or f64) and y[k] receives output k's, rounded once into its dtype afterwards.
// Operands already of type A are read and written in place.
template <class A, std::size_t NI, std::size_t NO, class Block>
void map_flat(int64_t n, const std::array<MapIn, NI>& in, const std::array<MapOut, NO>& out,
              Block&& block) {
  constexpr DType kA = std::is_same_v<A, float> ? DType::f32 : DType::f64;
  parallel_for(n, kMapChunk, [&](int64_t begin, int64_t end) {
    std::vector<A> buf((NI + NO) * kMapBlock);  // (NI + NO) row buffers [kMapBlock]
    for (int64_t first = begin; first < end; first += kMapBlock) {
      const int64_t len = std::min(kMapBlock, end - first);
      std::array<const A*, NI> x{};
      std::array<A*, NO> y{};
      for (std::size_t k = 0; k < NI; ++k) {
        const std::size_t esz = dtype_size(in[k].dtype);
        const void* src = static_cast<const char*>(in[k].data) + first * static_cast<int64_t>(esz);
        if (in[k].dtype == kA) {
          x[k] = static_cast<const A*>(src);
        } else {
          A* row = buf.data() + k * kMapBlock;
          load_block<A>(in[k].dtype, src, row, len);
          x[k] = row;
        }
      }
      for (std::size_t k = 0; k < NO; ++k)
        y[k] = out[k].dtype == kA ? static_cast<A*>(out[k].data) + first
                                  : buf.data() + (NI + k) * kMapBlock;
      block(x.data(), y.data(), len, first);
      for (std::size_t k = 0; k < NO; ++k) {
        if (out[k].dtype == kA) continue;
        const std::size_t esz = dtype_size(out[k].dtype);
        store_block<A>(y[k], out[k].dtype,
                       static_cast<char*>(out[k].data) + first * static_cast<int64_t>(esz), len);
      }
    }
  });
}

// The vector builds kernels come in: baseline x86-64 (SSE2), AVX2 (+FMA, F16C), AVX-512F.
enum class VecIsa : uint8_t { baseline, avx2, avx512 };
// The build to run for `isa`: Isa::scalar -> baseline, Isa::avx2 -> avx2 (throws on a CPU
// without it), Isa::best -> the widest this CPU runs.
VecIsa vec_isa(Isa isa);

}  // namespace mixprec::cpu
