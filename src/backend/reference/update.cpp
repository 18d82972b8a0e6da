// Reference optimizer update pass: the whole parameter as one f32 tile, stored per UpdatePass.
#include "mixprec/numerics/convert.h"
#include "reference_kernels.h"

namespace mixprec::backend::reference {
namespace {

std::vector<float> widen(const UpdateBuffer& b, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  widen_to_f32(b.dtype, b.data, v.data(), v.size());
  return v;
}

// v into b: nearest even, or stochastically with element i drawing at counter index_base + i
// of stream `stream` (the cpu pass's keys for the same element, whatever its tiling).
void store(const std::vector<float>& v, const UpdateBuffer& b, const UpdatePass& pass,
           uint64_t stream, bool stochastic) {
  ConvertOptions opts;
  if (stochastic)
    opts = {.rounding = Rounding::stochastic,
            .seed = pass.seed,
            .stream = stream,
            .index_base = pass.index_base};
  convert_from_f32(v.data(), b.dtype, b.data, v.size(), opts);
}

// v rounded to nearest even in dtype dt, widened back.
float round_to(DType dt, float v) {
  unsigned char bits[8];
  convert_from_f32(&v, dt, bits, 1);
  widen_to_f32(dt, bits, &v, 1);
  return v;
}

}  // namespace

void update(const UpdatePass& pass, const UpdateRule& rule) {
  const int64_t n = pass.numel;
  if (n == 0) return;
  const bool narrow = pass.master.dtype != DType::f32;
  std::vector<float> g = widen(pass.grad, n), p = widen(pass.master, n);
  std::vector<float> p_new = narrow ? std::vector<float>(p.size()) : std::vector<float>();
  std::array<std::vector<float>, kMaxUpdateState> s;
  UpdateTile tile{0, n, pass.inv_scale, g.data(), p.data(), {}, narrow ? p_new.data() : p.data()};
  for (int k = 0; k < pass.n_state; ++k) {
    const auto sk = static_cast<size_t>(k);
    s[sk] = widen(pass.state[sk], n);
    tile.s[sk] = s[sk].data();
  }
  rule(tile);
  const std::vector<float>& result = narrow ? p_new : p;  // an f32 master was updated in place
  if (narrow && pass.kahan.data) {
    // Compensated store (optim/stateful_optimizer.h), every operation in f32:
    // y = (p_new - p) - c;  t = round(p + y);  c = round((t - p) - y);  master = t.
    std::vector<float> c = widen(pass.kahan, n), t(p.size());
    for (size_t i = 0; i < t.size(); ++i) {
      const float y = (p_new[i] - p[i]) - c[i];
      t[i] = round_to(pass.master.dtype, p[i] + y);
      c[i] = (t[i] - p[i]) - y;
    }
    store(t, pass.master, pass, 0, false);  // exact: t is already in the master's dtype
    store(c, pass.kahan, pass, 0, false);
  } else {
    store(result, pass.master, pass, pass.streams[0], pass.stochastic);  // f32: a plain copy
  }
  for (int k = 0; k < pass.n_state; ++k) {
    const auto sk = static_cast<size_t>(k);
    store(s[sk], pass.state[sk], pass, pass.streams[sk + 1], pass.stochastic);
  }
  // The working copy is the rule's f32 result rounded to nearest even, not the stored master.
  if (pass.working.data) store(result, pass.working, pass, 0, false);
}

}  // namespace mixprec::backend::reference
