// Rotate-half RoPE: a cos/sin table per (position, frequency) from f64 angles, then one pass
// over the rows in f32 (f64 for f64), parallel over fixed row chunks.
#include "mixprec/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/row_io.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::cpu {
namespace {

// cos then sin, each [T, Dh/2], times factor, rounded from f64 to A; keyed by what made it.
template <class A>
struct Table {
  std::vector<double> inv_freq;
  double factor;
  int64_t offset, t;
  std::vector<A> cs;
};

template <class A>
std::shared_ptr<const Table<A>> make_table(std::span<const double> inv_freq, double factor,
                                           int64_t offset, int64_t t) {
  auto table = std::make_shared<Table<A>>(
      Table<A>{{inv_freq.begin(), inv_freq.end()}, factor, offset, t, {}});
  const auto half = static_cast<int64_t>(inv_freq.size());
  table->cs.resize(static_cast<size_t>(2 * t * half));
  A* c = table->cs.data();
  A* s = c + t * half;
  parallel_for(t, std::max<int64_t>(1, 4096 / std::max<int64_t>(half, 1)),
               [&](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p)
                   for (int64_t i = 0; i < half; ++i) {
                     const double angle = static_cast<double>(offset + p) * inv_freq[i];
                     // factor 1 (plain RoPE) leaves the f64 cos/sin, so their bits, as they were
                     c[p * half + i] = static_cast<A>(std::cos(angle) * factor);
                     s[p * half + i] = static_cast<A>(std::sin(angle) * factor);
                   }
               });
  return table;
}

// The table of the last call (per math type): forward, backward and every layer of a model
// ask for the same one, and long tables cost more than the rotation itself.
template <class A>
std::shared_ptr<const Table<A>> table_for(std::span<const double> inv_freq, double factor,
                                          int64_t offset, int64_t t) {
  static std::mutex mutex;
  static std::shared_ptr<const Table<A>> last;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (last && last->factor == factor && last->offset == offset && last->t == t &&
        std::ranges::equal(last->inv_freq, inv_freq))
      return last;
  }
  auto table = make_table<A>(inv_freq, factor, offset, t);
  std::lock_guard<std::mutex> lock(mutex);
  last = table;
  return table;
}

// Rows [r0, r1) of x rotated into out; x and out already point at row r0. `in` and `y` are
// [r1 - r0, Dh] in the math type (the storage itself for f32/f64, else L1-sized buffers).
template <class A>
void rotate_rows(const A* in, A* y, int64_t r0, int64_t r1, int64_t t, int64_t dh, const A* cos_t,
                 const A* sin_t, bool inverse) {
  const int64_t half = dh / 2;
  for (int64_t r = r0; r < r1; ++r) {
    const A* c = cos_t + (r % t) * half;
    const A* s = sin_t + (r % t) * half;
    const A* x1 = in + (r - r0) * dh;
    const A* x2 = x1 + half;
    A* y1 = y + (r - r0) * dh;
    A* y2 = y1 + half;
    if (!inverse) {
      for (int64_t i = 0; i < half; ++i) {
        y1[i] = x1[i] * c[i] - x2[i] * s[i];
        y2[i] = x2[i] * c[i] + x1[i] * s[i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        y1[i] = x1[i] * c[i] + x2[i] * s[i];
        y2[i] = x2[i] * c[i] - x1[i] * s[i];
      }
    }
  }
}

template <class I, class O>
void rotate(const I* x, O* out, int64_t rows, int64_t t, int64_t dh, const acc_t<I>* cos_t,
            const acc_t<I>* sin_t, bool inverse) {
  using A = acc_t<I>;
  // Narrow rows go through buffers of ~2K elements (in and out together fit L1), widened
  // and narrowed a group of rows per call: per-row calls cost more than the rotation.
  const int64_t group = std::max<int64_t>(1, 2048 / std::max<int64_t>(dh, 1));
  parallel_for(rows, rows_per_chunk(dh), [&](int64_t r0, int64_t r1) {
    thread_local std::vector<A> buf;  // grows once: no allocation or zeroing per chunk
    if (buf.size() < static_cast<size_t>(2 * group * dh))
      buf.resize(static_cast<size_t>(2 * group * dh));
    for (int64_t g0 = r0; g0 < r1; g0 += group) {
      const int64_t g1 = std::min(r1, g0 + group), n = (g1 - g0) * dh;
      const A* in;  // x rows [g1 - g0, Dh]
      if constexpr (std::is_same_v<I, A>) {
        in = x + g0 * dh;
      } else {
        load_row(x + g0 * dh, buf.data(), n);
        in = buf.data();
      }
      if constexpr (std::is_same_v<O, A>) {
        rotate_rows(in, out + g0 * dh, g0, g1, t, dh, cos_t, sin_t, inverse);
      } else {
        A* y = buf.data() + group * dh;  // out rows [g1 - g0, Dh]
        rotate_rows(in, y, g0, g1, t, dh, cos_t, sin_t, inverse);
        store_row(y, out + g0 * dh, n);
      }
    }
  });
}

}  // namespace

Tensor rope_rotate(const Tensor& x, std::span<const double> inv_freq, double factor, int64_t offset,
                   bool inverse, DType out_dtype) {
  const int64_t dh = x.size(-1), t = x.size(-2);
  const int64_t rows = dh == 0 ? 0 : x.numel() / dh;
  MIXPREC_CHECK(static_cast<int64_t>(inv_freq.size()) == dh / 2, "rope",
                "expects Dh/2 = " + std::to_string(dh / 2) + " inverse frequencies, got " +
                    std::to_string(inv_freq.size()));
  Tensor out = Tensor::empty(x.shape(), out_dtype);
  if (rows == 0) return out;
  dispatch_compute(x.dtype(), "rope", [&]<class I>() {
    using A = acc_t<I>;
    const auto table = table_for<A>(inv_freq, factor, offset, t);
    const A* c = table->cs.data();
    const A* s = c + t * (dh / 2);
    auto run = [&]<class O>() {
      rotate<I, O>(x.data<I>(), out.data<O>(), rows, t, dh, c, s, inverse);
    };
    if (out_dtype == x.dtype()) return run.template operator()<I>();
    MIXPREC_CHECK(
        x.dtype() == DType::f32 && is_narrow_compute(out_dtype), "rope",
        std::string("cannot rotate ") + dtype_name(x.dtype()) + " into " + dtype_name(out_dtype));
    if constexpr (std::is_same_v<I, float>) {
      if (out_dtype == DType::bf16) return run.template operator()<bf16>();
      return run.template operator()<f16>();
    }
  });
  return out;
}

}  // namespace mixprec::cpu
