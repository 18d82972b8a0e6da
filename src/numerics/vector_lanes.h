// GCC vector types of L 32-bit lanes for kernels written once and compiled per ISA (private
// to the library). typedef, not an alias template: GCC drops vector_size on alias templates.
#pragma once

#include <cstdint>

#define MIXPREC_INLINE [[gnu::always_inline]] inline

namespace mixprec::simd {

// L float lanes (vf), L uint32 lanes (vu), and the same bytes as L/2 uint64 lanes (vu64).
template <int L>
struct Lanes;
template <>
struct Lanes<4> {
  typedef float vf __attribute__((vector_size(16)));
  typedef uint32_t vu __attribute__((vector_size(16)));
  typedef uint64_t vu64 __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  typedef float vf __attribute__((vector_size(32)));
  typedef uint32_t vu __attribute__((vector_size(32)));
  typedef uint64_t vu64 __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  typedef float vf __attribute__((vector_size(64)));
  typedef uint32_t vu __attribute__((vector_size(64)));
  typedef uint64_t vu64 __attribute__((vector_size(64)));
};

}  // namespace mixprec::simd
