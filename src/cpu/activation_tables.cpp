// Lookup tables over all 65536 bf16 / f16 encodings, and the gather kernels that read them
// (see activation_tables.h). Built for SSE2 (scalar lookups, 4 lanes of math), AVX2 (8-lane
// gathers) and AVX-512F (16-lane gathers).
#include "activation_tables.h"

#include <immintrin.h>

#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "../numerics/vector_storage.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"

#pragma GCC diagnostic ignored "-Wpsabi"  // vector helpers are always inlined

namespace mixprec::cpu::lookup {
namespace {

constexpr std::size_t kEncodings = 1 << 16;
constexpr std::size_t kFns = static_cast<std::size_t>(Fn::kCount);
constexpr std::size_t kIsas = 3;  // VecIsa::baseline, avx2, avx512

int storage_slot(DType storage) {
  MIXPREC_CHECK(has_tables(storage), "activation tables",
                std::string("tables exist for bf16 and f16 storage, not ") + dtype_name(storage));
  return storage == DType::bf16 ? 0 : 1;
}

// One table per (function, storage, build), built on first use.
template <class E, std::size_t Extra>
struct TableSet {
  struct Slot {
    std::once_flag once;
    std::unique_ptr<E[]> data;
  };
  std::array<Slot, kFns * 2 * kIsas> slots;

  template <class Fill>
  const E* get(Fn fn, DType storage, VecIsa isa, Fill&& fill) {
    const std::size_t i =
        (static_cast<std::size_t>(fn) * 2 + static_cast<std::size_t>(storage_slot(storage))) *
            kIsas +
        static_cast<std::size_t>(isa);
    Slot& s = slots[i];
    std::call_once(s.once, [&] {
      // Extra zeroed entries past the end: a 4-byte gather at the last 2-byte entry.
      s.data = std::make_unique<E[]>(kEncodings + Extra);
      fill(s.data.get());
    });
    return s.data.get();
  }
};

TableSet<float, 0>& f32_tables() {
  static TableSet<float, 0> t;
  return t;
}
TableSet<uint16_t, 2>& rounded_tables() {
  static TableSet<uint16_t, 2> t;
  return t;
}

// ---- kernels ----

using simd::Lanes;
using simd::StorageLanes;

template <int L, class T>
MIXPREC_INLINE typename Lanes<L>::vf widen(const T* p) {
  return StorageLanes<L>::load(p);
}

// table[x[j]] for L lanes (values), and y[j] = table[x[j]] (16-bit encodings): gathers in
// the AVX builds, scalar loads in the SSE2 one. Each carries its ISA's target, as in
// vector_storage.h, so it inlines into that build only.
template <int L>
struct Gather {
  template <class T>
  MIXPREC_INLINE static typename Lanes<L>::vf values(const float* table, const T* x) {
    typename Lanes<L>::vf v;
    for (int j = 0; j < L; ++j) v[j] = table[x[j].bits];
    return v;
  }
  template <class T>
  MIXPREC_INLINE static void encodings(const uint16_t* table, const T* x, T* y) {
    for (int j = 0; j < L; ++j) y[j].bits = table[x[j].bits];
  }
};

#define MIXPREC_AVX2 [[gnu::target("avx2,fma,f16c")]] inline
template <>
struct Gather<8> {
  MIXPREC_AVX2 static __m256i indices(const void* x) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(x)));
  }
  template <class T>
  MIXPREC_AVX2 static Lanes<8>::vf values(const float* table, const T* x) {
    return reinterpret_cast<Lanes<8>::vf>(_mm256_i32gather_ps(table, indices(x), 4));
  }
  template <class T>
  MIXPREC_AVX2 static void encodings(const uint16_t* table, const T* x, T* y) {
    // 4 bytes from each 2-byte entry (the table has padding past its end); keep the low 2.
    const __m256i v =
        _mm256_and_si256(_mm256_i32gather_epi32(reinterpret_cast<const int*>(table), indices(x), 2),
                         _mm256_set1_epi32(0xFFFF));
    const __m256i packed = _mm256_packus_epi32(v, v);  // lanes < 2^16: no saturation
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y),
                     _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
  }
};
#undef MIXPREC_AVX2

#define MIXPREC_AVX512 [[gnu::target("avx512f,avx2,fma,f16c")]] inline
template <>
struct Gather<16> {
  MIXPREC_AVX512 static __m512i indices(const void* x) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(x)));
  }
  template <class T>
  MIXPREC_AVX512 static Lanes<16>::vf values(const float* table, const T* x) {
    return reinterpret_cast<Lanes<16>::vf>(_mm512_i32gather_ps(indices(x), table, 4));
  }
  template <class T>
  MIXPREC_AVX512 static void encodings(const uint16_t* table, const T* x, T* y) {
    const __m512i v = _mm512_i32gather_epi32(indices(x), table, 2);  // low 2 bytes wanted
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm512_cvtepi32_epi16(v));
  }
};
#undef MIXPREC_AVX512

// Elements ahead to prefetch (the inputs stream from memory; the tables stay in cache).
constexpr int64_t kPrefetchAhead = 1024;

// Form: 0 = map (u16 table), 1 = a·t[x], 2 = (a·b)·t[x]. Whole vectors, then the tail
// through zero-padded vectors (a zero encoding is a valid index).
template <int Form, int L, class T, class Table>
MIXPREC_INLINE void run(const Table* table, const T* x, const T* a, const T* b, T* y, int64_t n) {
  auto step = [&](const T* xs, const T* as, const T* bs, T* ys) {
    if constexpr (Form == 0) {
      Gather<L>::encodings(table, xs, ys);
    } else if constexpr (Form == 1) {
      StorageLanes<L>::store(ys, widen<L>(as) * Gather<L>::values(table, xs));
    } else {
      StorageLanes<L>::store(ys, (widen<L>(as) * widen<L>(bs)) * Gather<L>::values(table, xs));
    }
  };
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    __builtin_prefetch(x + i + kPrefetchAhead);
    if constexpr (Form >= 1) __builtin_prefetch(a + i + kPrefetchAhead);
    if constexpr (Form == 2) __builtin_prefetch(b + i + kPrefetchAhead);
    step(x + i, Form >= 1 ? a + i : nullptr, Form == 2 ? b + i : nullptr, y + i);
  }
  if (i == n) return;
  const auto bytes = static_cast<std::size_t>(n - i) * sizeof(T);
  T px[L] = {}, pa[L] = {}, pb[L] = {}, py[L] = {};  // [L] each: one tail vector
  std::memcpy(static_cast<void*>(px), x + i, bytes);
  if constexpr (Form >= 1) std::memcpy(static_cast<void*>(pa), a + i, bytes);
  if constexpr (Form == 2) std::memcpy(static_cast<void*>(pb), b + i, bytes);
  step(px, pa, pb, py);
  std::memcpy(static_cast<void*>(y + i), py, bytes);
}

template <int Form, class T, class Table>
void run_baseline(const Table* t, const T* x, const T* a, const T* b, T* y, int64_t n) {
  run<Form, 4>(t, x, a, b, y, n);
}
template <int Form, class T, class Table>
[[gnu::target("avx2,fma,f16c"), gnu::flatten]] void run_avx2(const Table* t, const T* x, const T* a,
                                                             const T* b, T* y, int64_t n) {
  run<Form, 8>(t, x, a, b, y, n);
}
template <int Form, class T, class Table>
[[gnu::target("avx512f,avx2,fma,f16c"), gnu::flatten]] void run_avx512(const Table* t, const T* x,
                                                                       const T* a, const T* b, T* y,
                                                                       int64_t n) {
  run<Form, 16>(t, x, a, b, y, n);
}

template <int Form, class Table>
void dispatch(DType storage, VecIsa isa, const Table* t, const void* x, const void* a,
              const void* b, void* y, int64_t n) {
  auto go = [&]<class T>() {
    const auto* xs = static_cast<const T*>(x);
    const auto* as = static_cast<const T*>(a);
    const auto* bs = static_cast<const T*>(b);
    auto* ys = static_cast<T*>(y);
    switch (isa) {
      case VecIsa::avx512:
        return run_avx512<Form, T>(t, xs, as, bs, ys, n);
      case VecIsa::avx2:
        return run_avx2<Form, T>(t, xs, as, bs, ys, n);
      case VecIsa::baseline:
        break;
    }
    run_baseline<Form, T>(t, xs, as, bs, ys, n);
  };
  if (storage_slot(storage) == 0)
    go.template operator()<bf16>();
  else
    go.template operator()<f16>();
}

}  // namespace

bool has_tables(DType storage) {
  return storage == DType::bf16 || storage == DType::f16;
}

namespace {

// values[bits] = kernel(widen(bits)) for every encoding of `storage`.
void evaluate_every_encoding(DType storage, VecIsa isa, F32Kernel kernel, float* values) {
  std::vector<uint16_t> encodings(kEncodings);  // [65536] every bit pattern
  for (std::size_t b = 0; b < kEncodings; ++b) encodings[b] = static_cast<uint16_t>(b);
  widen_row_f32(storage, encodings.data(), values, kEncodings);
  kernel(isa, values, values, static_cast<int64_t>(kEncodings));
}

}  // namespace

const float* f32_table(Fn fn, DType storage, VecIsa isa, F32Kernel kernel) {
  return f32_tables().get(fn, storage, isa, [&](float* table) {
    evaluate_every_encoding(storage, isa, kernel, table);
  });
}

// Built through a temporary f32 table: only the rounded values are kept.
const uint16_t* rounded_table(Fn fn, DType storage, VecIsa isa, F32Kernel kernel) {
  return rounded_tables().get(fn, storage, isa, [&](uint16_t* table) {
    std::vector<float> values(kEncodings);  // [65536]
    evaluate_every_encoding(storage, isa, kernel, values.data());
    narrow_row_f32(values.data(), storage, table, kEncodings);
  });
}

void map(DType storage, VecIsa isa, const uint16_t* table, const void* x, void* y, int64_t n) {
  dispatch<0>(storage, isa, table, x, nullptr, nullptr, y, n);
}

void scale(DType storage, VecIsa isa, const float* table, const void* x, const void* a, void* y,
           int64_t n) {
  dispatch<1>(storage, isa, table, x, a, nullptr, y, n);
}

void scale_product(DType storage, VecIsa isa, const float* table, const void* x, const void* a,
                   const void* b, void* y, int64_t n) {
  dispatch<2>(storage, isa, table, x, a, b, y, n);
}

}  // namespace mixprec::cpu::lookup
