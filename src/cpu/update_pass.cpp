#include "mixprec/cpu/update_pass.h"

#include <algorithm>
#include <type_traits>

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::cpu {
namespace {

constexpr int64_t kTile = kUpdateTile;
constexpr int64_t kUpdateGrain = int64_t{1} << 16;  // elements per parallel task

char* bytes(const backend::UpdateBuffer& b) {
  return static_cast<char*>(b.data);
}

// n elements at `at` of a contiguous buffer of dtype dt, as f32: the memory itself for f32,
// else widened into scratch.
float* f32_view(DType dt, char* base, int64_t at, int64_t n, float* scratch) {
  if (dt == DType::f32) return reinterpret_cast<float*>(base) + at;
  widen_row_f32(dt, base + at * static_cast<int64_t>(dtype_size(dt)), scratch,
                static_cast<std::size_t>(n));
  return scratch;
}

// Writes n f32 values into a narrow buffer: nearest even, or stochastic with buffer b's keys.
void store_narrow(const float* src, DType dt, char* base, int64_t at, int64_t n,
                  const backend::UpdatePass& pass, int buffer) {
  char* dst = base + at * static_cast<int64_t>(dtype_size(dt));
  if (!pass.stochastic) {
    narrow_row_f32(src, dt, dst, static_cast<std::size_t>(n));
    return;
  }
  // n <= kTile is far below the conversion's own parallel grain: no nested threads.
  const ConvertOptions opts{.rounding = Rounding::stochastic,
                            .seed = pass.seed,
                            .stream = pass.streams[static_cast<std::size_t>(buffer)],
                            .index_base = pass.index_base + static_cast<uint64_t>(at)};
  convert_from_f32(src, dt, dst, static_cast<std::size_t>(n), opts);
}

// Compensated store of a narrow master (stateful_optimizer.h has the formulation).
template <class T>
void kahan_store(const float* p, const float* p_new, T* master, T* comp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float y = (p_new[i] - p[i]) - static_cast<float>(comp[i]);
    const T t = T(p[i] + y);
    comp[i] = T((static_cast<float>(t) - p[i]) - y);
    master[i] = t;
  }
}

}  // namespace

double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale) {
  const DType dt = grad.dtype();
  char* base = static_cast<char*>(grad.raw_data());
  alignas(64) float buf[kTile];  // [kTile] a narrow gradient widened to f32
  // Eight running sums, element i into lane i % 8 (tiles are a multiple of 8 long), added in
  // lane order at the end: independent chains the compiler vectorises, where one f64 sum is
  // a chain of dependent adds (4x slower than memory on a 72 MB gradient).
  constexpr int64_t kLanes = 8;
  static_assert(kTile % kLanes == 0);
  double lane[kLanes] = {};
  for (int64_t at = begin; at < end; at += kTile) {
    const int64_t n = std::min(kTile, end - at);
    const float* g = f32_view(dt, base, at, n, buf);
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) {
        const double v = static_cast<double>(g[i + j] * inv_scale);
        lane[j] += v * v;
      }
    for (; i < n; ++i) {
      const double v = static_cast<double>(g[i] * inv_scale);
      lane[i % kLanes] += v * v;
    }
  }
  double sum = 0;
  for (double l : lane) sum += l;
  return sum;
}

void update_pass(const backend::UpdatePass& pass, const backend::UpdateRule& rule) {
  const DType mdt = pass.master.dtype, gdt = pass.grad.dtype;
  const bool narrow = mdt != DType::f32;
  const bool refresh = pass.working.data != nullptr;
  const DType wdt = pass.working.dtype;
  char* const g_base = bytes(pass.grad);
  char* const m_base = bytes(pass.master);
  char* const w_base = bytes(pass.working);
  char* const c_base = bytes(pass.kahan);
  std::array<char*, backend::kMaxUpdateState> s_base{};
  for (int k = 0; k < pass.n_state; ++k)
    s_base[static_cast<std::size_t>(k)] = bytes(pass.state[static_cast<std::size_t>(k)]);

  parallel_for(pass.numel, kUpdateGrain, [&](int64_t begin, int64_t end) {
    // [kTile] f32 scratch per buffer: gradient, old and new master, state
    alignas(64) float g_buf[kTile], p_buf[kTile], p_new_buf[kTile];
    alignas(64) float s_buf[backend::kMaxUpdateState][kTile];
    for (int64_t at = begin; at < end; at += kTile) {
      const int64_t n = std::min(kTile, end - at);
      backend::UpdateTile tile{at,
                               n,
                               pass.inv_scale,
                               f32_view(gdt, g_base, at, n, g_buf),
                               f32_view(mdt, m_base, at, n, p_buf),
                               {},
                               nullptr};
      for (int k = 0; k < pass.n_state; ++k) {
        const auto sk = static_cast<std::size_t>(k);
        tile.s[sk] = f32_view(mdt, s_base[sk], at, n, s_buf[sk]);
      }
      tile.p_new = narrow ? p_new_buf : const_cast<float*>(tile.p);
      rule(tile);
      if (narrow) {
        if (c_base) {
          dispatch_compute(mdt, "update_pass", [&]<class T>() {
            if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
              kahan_store(tile.p, tile.p_new, reinterpret_cast<T*>(m_base) + at,
                          reinterpret_cast<T*>(c_base) + at, n);
          });
        } else {
          store_narrow(tile.p_new, mdt, m_base, at, n, pass, 0);
        }
        for (int k = 0; k < pass.n_state; ++k)
          store_narrow(tile.s[static_cast<std::size_t>(k)], mdt,
                       s_base[static_cast<std::size_t>(k)], at, n, pass, 1 + k);
      }
      if (refresh)
        narrow_row_f32(tile.p_new, wdt, w_base + at * static_cast<int64_t>(dtype_size(wdt)),
                       static_cast<std::size_t>(n));
    }
  });
}

}  // namespace mixprec::cpu
