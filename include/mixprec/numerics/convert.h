// Bulk conversions between f32/f64 buffers and the narrow formats. The AVX2/F16C kernels are
// chosen at run time; the portable scalar path gives the same bits (tests enforce it).
// Large buffers are split over threads in fixed chunks, so results never depend on the
// thread count (stochastic rounding included: its random numbers are keyed by index).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/rounding.h"

namespace mixprec {

// Which kernels to use: `best` picks AVX2 when the CPU has AVX2+FMA+F16C.
enum class Isa : uint8_t { best, scalar, avx2 };

bool cpu_has_avx2_f16c();
bool cpu_has_avx512f();         // AVX-512F (with AVX2, FMA and F16C)
const char* isa_name(Isa isa);  // the kernel `isa` resolves to on this CPU: "avx2" or "scalar"

// Narrowing: f32 -> dst dtype (bf16, f16, f8_e4m3fn, f8_e5m2; f32 copies).
void convert_from_f32(const float* src, DType dst_dtype, void* dst, std::size_t n,
                      const ConvertOptions& opts = {}, Isa isa = Isa::best);
// Narrowing from f64 with a single rounding (never f64 -> f32 -> narrow); dst may be f32.
void convert_from_f64(const double* src, DType dst_dtype, void* dst, std::size_t n,
                      const ConvertOptions& opts = {});
// Exact widening: src dtype (any floating dtype but f64) -> f32.
void widen_to_f32(DType src_dtype, const void* src, float* dst, std::size_t n, Isa isa = Isa::best);
// Exact widening of any floating dtype to f64.
void widen_to_f64(DType src_dtype, const void* src, double* dst, std::size_t n);
// TF32 rounding of f32 values (mantissa to 10 bits, result stored as f32). In place is fine.
void round_to_tf32(const float* src, float* dst, std::size_t n, const ConvertOptions& opts = {},
                   Isa isa = Isa::best);

// Serial, round-to-nearest-even versions for kernels that convert one row at a time inside
// their own parallel loop (no thread fan-out, no option checks beyond the dtype).
void widen_row_f32(DType src_dtype, const void* src, float* dst, std::size_t n);
void narrow_row_f32(const float* src, DType dst_dtype, void* dst, std::size_t n);

}  // namespace mixprec
