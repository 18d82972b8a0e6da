#include "fused_update.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/tensor/dispatch.h"

namespace mixprec::optim::detail {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

char* byte_ptr(const Tensor& t) {
  return static_cast<char*>(t.raw_data());
}

// n elements at `at` of a contiguous buffer of dtype dt, as f32: the memory itself for f32,
// else widened into scratch.
float* f32_view(DType dt, char* base, int64_t at, int64_t n, float* scratch) {
  if (dt == DType::f32) return reinterpret_cast<float*>(base) + at;
  widen_row_f32(dt, base + at * static_cast<int64_t>(dtype_size(dt)), scratch,
                static_cast<std::size_t>(n));
  return scratch;
}

// Writes n f32 values into a narrow buffer: nearest even, or stochastic with the buffer's keys.
void store_narrow(const float* src, DType dt, char* base, int64_t at, int64_t n, bool stochastic,
                  const RoundingKeys& keys, int buffer) {
  char* dst = base + at * static_cast<int64_t>(dtype_size(dt));
  if (!stochastic) {
    narrow_row_f32(src, dt, dst, static_cast<std::size_t>(n));
    return;
  }
  // n <= kTile is far below the conversion's own parallel grain: no nested threads.
  const ConvertOptions opts{.rounding = Rounding::stochastic,
                            .seed = keys.seed,
                            .stream = rounding_stream(keys, buffer),
                            .index_base = static_cast<uint64_t>(keys.index_offset + at)};
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

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

uint64_t rounding_stream(const RoundingKeys& keys, int buffer) {
  return splitmix64(keys.name_hash ^ splitmix64(static_cast<uint64_t>(keys.step) * 8 +
                                                static_cast<uint64_t>(buffer)));
}

double square_sum(const Tensor& grad, int64_t begin, int64_t end, float inv_scale) {
  const DType dt = grad.dtype();
  char* base = byte_ptr(grad);
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

Tensor checked_grad(const Parameter& param, const Tensor& grad, const char* where) {
  MIXPREC_CHECK(grad.shape() == param.master().shape(), where,
                "gradient of " + param.name() + " has shape " + shape_to_string(grad.shape()) +
                    ", the parameter " + shape_to_string(param.master().shape()));
  const DType dt = grad.dtype();
  MIXPREC_CHECK(dt == DType::f32 || dt == DType::bf16 || dt == DType::f16, where,
                "gradient of " + param.name() + " is " + dtype_name(dt) +
                    "; optimizers read f32, bf16 or f16 gradients");
  MIXPREC_CHECK(!grad.is_meta(), where, "gradient of " + param.name() + " is on the meta device");
  return grad.contiguous();
}

void fused_update(Parameter& param, const Tensor& grad, float inv_scale, std::span<Tensor> state,
                  Tensor& kahan, const RoundingKeys& param_keys, const TileRule& rule) {
  RoundingKeys keys = param_keys;
  keys.index_offset = param.element_offset();
  const Tensor& master = param.master();
  const DType mdt = master.dtype(), gdt = grad.dtype();
  const bool narrow = mdt != DType::f32;
  const bool stochastic = narrow && param.policy().master_update == amp::MasterUpdate::stochastic;
  const bool refresh = param.has_working_copy();
  const DType wdt = param.value().dtype();
  char* const g_base = byte_ptr(grad);
  char* const m_base = byte_ptr(master);
  char* const w_base = refresh ? byte_ptr(param.value()) : nullptr;
  char* const c_base = kahan.defined() ? byte_ptr(kahan) : nullptr;
  std::array<char*, kMaxState> s_base{};
  for (std::size_t k = 0; k < state.size(); ++k) s_base[k] = byte_ptr(state[k]);

  parallel_for(master.numel(), kChunk, [&](int64_t begin, int64_t end) {
    // [kTile] f32 scratch per buffer: gradient, old and new master, state
    alignas(64) float g_buf[kTile], p_buf[kTile], p_new_buf[kTile];
    alignas(64) float s_buf[kMaxState][kTile];
    for (int64_t at = begin; at < end; at += kTile) {
      const int64_t n = std::min(kTile, end - at);
      Tile tile{at,
                n,
                inv_scale,
                f32_view(gdt, g_base, at, n, g_buf),
                f32_view(mdt, m_base, at, n, p_buf),
                {},
                nullptr};
      for (std::size_t k = 0; k < state.size(); ++k)
        tile.s[k] = f32_view(mdt, s_base[k], at, n, s_buf[k]);
      tile.p_new = narrow ? p_new_buf : const_cast<float*>(tile.p);
      rule(tile);
      if (narrow) {
        if (c_base) {
          dispatch_compute(mdt, "fused_update", [&]<class T>() {
            if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
              kahan_store(tile.p, tile.p_new, reinterpret_cast<T*>(m_base) + at,
                          reinterpret_cast<T*>(c_base) + at, n);
          });
        } else {
          store_narrow(tile.p_new, mdt, m_base, at, n, stochastic, keys, 0);
        }
        for (std::size_t k = 0; k < state.size(); ++k)
          store_narrow(tile.s[k], mdt, s_base[k], at, n, stochastic, keys, 1 + static_cast<int>(k));
      }
      if (refresh)
        narrow_row_f32(tile.p_new, wdt, w_base + at * static_cast<int64_t>(dtype_size(wdt)),
                       static_cast<std::size_t>(n));
    }
  });
}

}  // namespace mixprec::optim::detail
