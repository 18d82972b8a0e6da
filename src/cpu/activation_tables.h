// Activations of bf16 / f16 tensors by table lookup. A 16-bit storage type has only 65536
// encodings, so f(x) for every one of them fits a table (128 KiB as 16-bit results, 256 KiB
// as f32): built once, lazily, by running the f32 vector kernel over all encodings, then
// read with gathers. The erf/exp/sigmoid math costs ~30-60 vector ops per 16 elements; a
// gather costs a few, so the op becomes memory-bound as it should be.
//
// The results are the same bits as computing: a table holds exactly what the f32 kernel
// gives for the widened input, and the kernels below finish with the same single f32 product
// and the same rounding (vector_storage.h) as the computed path. Backward ops tabulate the
// factor D(x) of g·D(x) (the f32 kernel's last step is that product, so running it with
// g = 1 gives D exactly). Only the payload of a NaN times a NaN may differ (x86 returns one of
// the two, and the compiler may order the operands either way).
#pragma once

#include <cstdint>

#include "mixprec/cpu/elementwise.h"
#include "mixprec/numerics/dtype.h"

namespace mixprec::cpu::lookup {

// Which function a table holds (one set per storage dtype and vector build).
enum class Fn : uint8_t {
  gelu,
  gelu_slope,  // d/dx gelu
  gelu_tanh,
  gelu_tanh_slope,
  silu,
  silu_slope,
  kCount
};

// y[i] = f(x[i]) in f32 for n widened inputs, by the `isa` build of the vector kernel (run
// only while a table is built).
using F32Kernel = void (*)(VecIsa isa, const float* x, float* y, int64_t n);

// The storage dtypes tables exist for: bf16 and f16.
bool has_tables(DType storage);

// table[bits] = f(widen(bits)) for every encoding of `storage` (bf16 or f16), built by
// `kernel` on first use and kept for the process's lifetime. Thread-safe.
const float* f32_table(Fn fn, DType storage, VecIsa isa, F32Kernel kernel);
// The same values rounded once to `storage` (16-bit encodings).
const uint16_t* rounded_table(Fn fn, DType storage, VecIsa isa, F32Kernel kernel);

// The kernels, over n elements all stored as `storage` (x holds the table indices; a and b
// are widened to f32 and the result is rounded once to `storage`):
//   y = table[x]
void map(DType storage, VecIsa isa, const uint16_t* table, const void* x, void* y, int64_t n);
//   y = a · table[x]
void scale(DType storage, VecIsa isa, const float* table, const void* x, const void* a, void* y,
           int64_t n);
//   y = (a · b) · table[x]
void scale_product(DType storage, VecIsa isa, const float* table, const void* x, const void* a,
                   const void* b, void* y, int64_t n);

}  // namespace mixprec::cpu::lookup
