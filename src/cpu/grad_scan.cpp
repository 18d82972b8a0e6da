// Gradient scans: plain loops over the storage type that the compiler vectorises; the finite
// test is on the exponent bits, so it costs one and + compare per element.
#include "mixprec/cpu/grad_scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/core/parallel.h"
#include "mixprec/numerics/storage_types.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kScanPiece = 1 << 16;  // elements per parallel task (fixed boundaries)

void check_grad(const Tensor& g, const char* where) {
  MIXPREC_CHECK(g.defined() && is_floating(g.dtype()) && !g.is_meta(), where,
                "expected a floating tensor with data");
  MIXPREC_CHECK(g.is_contiguous(), where, "gradient must be contiguous");
}

// The raw bits of a storage type and the mask of its exponent field: a value is inf or NaN
// exactly when all exponent bits are set. Testing bits (not std::isfinite) lets the compiler
// vectorise the scans.
template <class T>
struct BitsOf {
  using type = decltype(T::bits);
  static constexpr type kExpMask = static_cast<type>(T::format().exp_all_ones());
};
template <>
struct BitsOf<float> {
  using type = uint32_t;
  static constexpr type kExpMask = 0x7F800000u;
};
template <>
struct BitsOf<double> {
  using type = uint64_t;
  static constexpr type kExpMask = 0x7FF0000000000000ull;
};

template <class T>
bool finite(T v) {
  typename BitsOf<T>::type b;
  std::memcpy(&b, &v, sizeof b);
  return (b & BitsOf<T>::kExpMask) != BitsOf<T>::kExpMask;
}

// True when any of p[b, e) is inf or NaN.
template <class T>
bool any_nonfinite(const T* p, int64_t b, int64_t e) {
  using B = typename BitsOf<T>::type;
  const auto* bits = reinterpret_cast<const B*>(p);
  unsigned bad = 0;
  for (int64_t i = b; i < e; ++i) bad |= (bits[i] & BitsOf<T>::kExpMask) == BitsOf<T>::kExpMask;
  return bad != 0;
}

// The monitor's statistics of p[b, e): branch-free, in 8 lanes (element i into lane
// (i - b) % 8, each lane summed in order, the lanes added in order at the end), so the
// compiler vectorises it and the sum of squares has optim::grad_norm's bits.
template <class T>
GradNumerics numerics_range(const T* p, int64_t b, int64_t e, double under, double over) {
  constexpr int64_t kLanes = 8;
  double sum[kLanes] = {};
  float amax[kLanes] = {};
  int64_t bad[kLanes] = {}, low[kLanes] = {}, high[kLanes] = {};
  auto add = [&](int64_t lane, T v) {
    const bool ok = finite(v);
    const double a = ok ? std::fabs(static_cast<double>(v)) : 0.0;
    sum[lane] += a * a;
    amax[lane] = std::max(amax[lane], static_cast<float>(a));
    bad[lane] += !ok;
    low[lane] += ok & (a < under);
    high[lane] += a > over;
  };
  int64_t i = b;
  for (; i + kLanes <= e; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) add(j, p[i + j]);
  for (int64_t j = 0; i < e; ++i, ++j) add(j, p[i]);
  GradNumerics s;
  s.numel = e - b;
  for (int64_t j = 0; j < kLanes; ++j) {
    s.sum_squares += sum[j];
    s.amax = std::max(s.amax, amax[j]);
    s.nonfinite += bad[j];
    s.underflow += low[j];
    s.overflow += high[j];
  }
  return s;
}

// g * inv_scale over p[b, e) tested (and written back when `write`). With inv_scale <= 1 a
// finite value stays finite, so a read-only scan only needs the bits.
template <class T>
bool scan_range(T* p, int64_t b, int64_t e, float inv_scale, bool write) {
  if (inv_scale == 1.0f || (!write && inv_scale < 1.0f)) return any_nonfinite(p, b, e);
  // The product in f64 is exact for every storage type but f64, so a narrow gradient is
  // rounded once. A read-only check tests the product in f32 (what an optimizer reading
  // g * inv_scale sees); a write tests what is stored.
  unsigned bad = 0;
  for (int64_t i = b; i < e; ++i) {
    const double v = static_cast<double>(p[i]) * static_cast<double>(inv_scale);
    if (write) {
      p[i] = T(v);
      bad |= !finite(p[i]);
    } else {
      bad |= !std::isfinite(static_cast<float>(v));
    }
  }
  return bad != 0;
}

template <class F>
bool dispatch_scan(const Tensor& g, F&& f) {
  switch (g.dtype()) {
    case DType::f64:
      return f(g.data<double>());
    case DType::f32:
      return f(g.data<float>());
    case DType::bf16:
      return f(g.data<bf16>());
    case DType::f16:
      return f(g.data<f16>());
    default:
      throw Error("gradient scan", std::string("unsupported dtype ") + dtype_name(g.dtype()));
  }
}

// Every gradient scanned in one parallel pass of kScanPiece pieces: the index of the first one
// holding a non-finite result, or -1.
int64_t scan_all(std::span<const Tensor> gs, float inv_scale, bool write, const char* where) {
  std::vector<int64_t> sizes;
  for (const Tensor& g : gs) {
    check_grad(g, where);
    sizes.push_back(g.numel());
  }
  const std::vector<int64_t> bad =  // per piece: its tensor's index when it found one, else -1
      map_pieces<int64_t>(sizes, kScanPiece, [&](std::size_t t, int64_t b, int64_t e) {
        const bool found =
            dispatch_scan(gs[t], [&](auto* p) { return scan_range(p, b, e, inv_scale, write); });
        return found ? static_cast<int64_t>(t) : int64_t{-1};
      });
  for (int64_t t : bad)
    if (t >= 0) return t;  // pieces come in tensor order
  return -1;
}

}  // namespace

bool unscale_and_check(Tensor& g, float inv_scale) {
  return scan_all({&g, 1}, inv_scale, true, "unscale_and_check") >= 0;
}

int64_t unscale_and_check(std::span<const Tensor> gs, float inv_scale) {
  return scan_all(gs, inv_scale, true, "unscale_and_check");
}

int64_t first_nonfinite(std::span<const Tensor> gs, float inv_scale) {
  return scan_all(gs, inv_scale, false, "first_nonfinite");
}

void clamp_in_place(std::span<const Tensor> gs, double lo, double hi) {
  std::vector<int64_t> sizes;
  for (const Tensor& g : gs) {
    check_grad(g, "clamp_in_place");
    sizes.push_back(g.numel());
  }
  map_pieces<int>(sizes, kScanPiece, [&](std::size_t t, int64_t b, int64_t e) {
    return dispatch_scan(gs[t],
                         [&](auto* p) {
                           using T = std::remove_pointer_t<decltype(p)>;
                           for (int64_t i = b; i < e; ++i) {
                             const auto v =
                                 static_cast<double>(p[i]);  // NaN fails both tests and stays
                             if (v < lo) p[i] = T(lo);
                             if (v > hi) p[i] = T(hi);
                           }
                           return false;
                         })
               ? 1
               : 0;
  });
}

GradNumerics grad_numerics(const Tensor& g, double scale, double underflow_below,
                           double overflow_above) {
  return grad_numerics({&g, 1}, scale, underflow_below, overflow_above).per_tensor[0];
}

GradNumericsPass grad_numerics(std::span<const Tensor> gs, double scale, double underflow_below,
                               double overflow_above) {
  std::vector<int64_t> sizes;
  for (const Tensor& g : gs) {
    check_grad(g, "grad_numerics");
    sizes.push_back(g.numel());
  }
  // Thresholds on |g| as stored: |g * scale| < t  <=>  |g| < t / scale.
  const double under = underflow_below / scale, over = overflow_above / scale;
  const std::vector<GradNumerics> pieces =
      map_pieces<GradNumerics>(sizes, kScanPiece, [&](std::size_t t, int64_t b, int64_t e) {
        GradNumerics s;
        dispatch_scan(gs[t], [&](auto* p) {
          s = numerics_range(p, b, e, under, over);
          return false;
        });
        return s;
      });
  GradNumericsPass out;
  out.per_tensor.resize(gs.size());
  std::size_t piece = 0;
  for (std::size_t t = 0; t < gs.size(); ++t) {
    GradNumerics& total = out.per_tensor[t];
    for (int64_t b = 0; b < sizes[t]; b += kScanPiece, ++piece) {  // map_pieces' order: fixed
      const GradNumerics& s = pieces[piece];
      total.numel += s.numel;
      total.amax = std::max(total.amax, s.amax);
      total.nonfinite += s.nonfinite;
      total.underflow += s.underflow;
      total.overflow += s.overflow;
      total.sum_squares += s.sum_squares;
      out.sum_squares += s.sum_squares;
    }
  }
  return out;
}

}  // namespace mixprec::cpu
