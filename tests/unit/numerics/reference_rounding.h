// Independent references for the conversion tests. Nothing here uses the library's encoder:
// values are decoded from bit fields by hand and rounding is decided by comparing exact
// distances in f64, so a shared mistake would have to be made twice in different ways.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace mixprec::testref {

// A format described only by its field widths, as a spec sheet would.
struct Spec {
  int exp_bits, mant_bits, bias;
  bool ieee_specials;  // all-ones exponent is inf/NaN (false: only all-ones pattern is NaN)
};
inline constexpr Spec kBF16{8, 7, 127, true};
inline constexpr Spec kF16{5, 10, 15, true};
inline constexpr Spec kE4M3FN{4, 3, 7, false};
inline constexpr Spec kE5M2{5, 2, 15, true};

// Value of a non-negative finite encoding, from its fields.
inline double field_value(const Spec& s, uint32_t bits) {
  const uint32_t e = bits >> s.mant_bits;
  const uint32_t m = bits & ((1u << s.mant_bits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - s.bias - s.mant_bits);
  return std::ldexp(static_cast<double>(m + (1u << s.mant_bits)),
                    static_cast<int>(e) - s.bias - s.mant_bits);
}

// All non-negative finite magnitudes in increasing order, index == encoding.
inline std::vector<double> magnitudes(const Spec& s) {
  const uint32_t count = 1u << (s.exp_bits + s.mant_bits);
  const uint32_t finite = s.ieee_specials ? count - (1u << s.mant_bits) : count - 1;
  std::vector<double> v(finite);
  for (uint32_t b = 0; b < finite; ++b) v[b] = field_value(s, b);
  return v;
}

// Round-to-nearest-even of a finite |x| by search in the sorted magnitudes. Returns the
// encoding, or mags.size() when the result overflows (the "next" value past max is
// max + one ulp, as IEEE's unbounded-exponent rule says).
inline uint32_t nearest_even_index(const std::vector<double>& mags, double ax) {
  const auto it = std::upper_bound(mags.begin(), mags.end(), ax);
  if (it == mags.begin()) return 0;
  const auto lo = static_cast<uint32_t>(it - mags.begin() - 1);
  if (mags[lo] == ax) return lo;
  const double hi_value =
      lo + 1 < mags.size() ? mags[lo + 1] : mags[lo] + (mags[lo] - mags[lo - 1]);
  const double dlo = ax - mags[lo], dhi = hi_value - ax;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return lo + 1;
  return (lo % 2 == 0) ? lo : lo + 1;
}

// Round toward zero: the largest magnitude <= |x| (never overflows).
inline uint32_t toward_zero_index(const std::vector<double>& mags, double ax) {
  const auto it = std::upper_bound(mags.begin(), mags.end(), ax);
  return static_cast<uint32_t>(it - mags.begin() - 1);
}

// f32 -> bf16, round-to-nearest-even, by exact distances: the two bf16 neighbours of x are
// the truncation t and t + 1 ulp; both and x are exact in f64, so are the differences.
inline uint16_t bf16_rne_exact(uint32_t bits) {
  const float x = std::bit_cast<float>(bits);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint16_t t = static_cast<uint16_t>(bits >> 16);
  if (std::isinf(x)) return t;
  const double ax = std::fabs(static_cast<double>(x));
  const double lo = std::fabs(static_cast<double>(std::bit_cast<float>(uint32_t{t} << 16)));
  // ulp = 2^(max(exponent field, 1) - 127 - 7), built as f64 bits
  const int e = std::max((t >> 7) & 0xFF, 1);
  const double ulp = std::bit_cast<double>(static_cast<uint64_t>(e - 134 + 1023) << 52);
  const double hi = lo + ulp;  // may be 2^128: then rounding up is overflow to inf, encoded t+1
  const double dlo = ax - lo, dhi = hi - ax;
  const bool up = dhi < dlo || (dhi == dlo && (t & 1));
  return static_cast<uint16_t>(t + (up ? 1 : 0));
}

}  // namespace mixprec::testref
