// rope with explicit frequencies (llama3 / yarn scaling): both backends against a direct f64
// evaluation of the rotation, f32 and bf16, the gradient (the transposed rotation times the
// attention factor), bad frequencies; and the unscaled path keeping its bits.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mixprec/backend/backend.h"
#include "mixprec/ops/attention.h"
#include "mixprec/ops/rope_scaling.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// out = a·(x·cos + rotate_half(x)·sin), angle (offset + t)·inv_freq[i], all in f64; inverse:
// minus the angle, the same a.
Tensor naive_rope(const Tensor& x, const RopeFrequencies& f, int64_t offset, bool inverse = false) {
  const int64_t T = x.size(2), D = x.size(3), half = D / 2;
  const std::vector<double> in = x.to_doubles();
  std::vector<double> out(in.size());
  for (size_t row = 0; row < in.size() / D; ++row) {
    const double pos = static_cast<double>(offset + static_cast<int64_t>(row) % T);
    for (int64_t i = 0; i < D; ++i) {
      const double angle = pos * f.inv_freq[static_cast<size_t>(i % half)];
      const double rot = i < half ? -in[row * D + i + half] : in[row * D + i - half];
      const double s = inverse ? -std::sin(angle) : std::sin(angle);
      out[row * D + i] = f.attention_factor * (in[row * D + i] * std::cos(angle) + rot * s);
    }
  }
  return Tensor::from_doubles(out, x.shape(), DType::f64);
}

// The scalings of the Hugging Face checkpoints the fixtures describe.
struct Scaled {
  const char* name;
  int64_t head_dim;
  RopeFrequencies freqs;
};

std::vector<Scaled> scaled_cases() {
  RopeScaling llama;
  llama.type = RopeScaling::Type::llama3;
  llama.factor = 8, llama.low_freq_factor = 1, llama.high_freq_factor = 4;
  llama.original_max_position_embeddings = 8192;
  RopeScaling deepseek;
  deepseek.type = RopeScaling::Type::yarn;
  deepseek.factor = 40, deepseek.mscale = 1, deepseek.mscale_all_dim = 1;
  deepseek.original_max_position_embeddings = 4096;
  RopeScaling qwen;
  qwen.type = RopeScaling::Type::yarn;
  qwen.factor = 4, qwen.original_max_position_embeddings = 32768;
  RopeScaling gpt_oss = qwen;
  gpt_oss.factor = 32, gpt_oss.original_max_position_embeddings = 4096, gpt_oss.truncate = false;
  return {{"llama3.1 8B", 128, rope_frequencies(128, 500000, llama)},
          {"deepseek-v3", 64, rope_frequencies(64, 10000, deepseek)},
          {"qwen yarn x4", 128, rope_frequencies(128, 1e6, qwen)},
          {"gpt-oss", 64, rope_frequencies(64, 150000, gpt_oss)}};
}

Tensor on(const backend::Backend& b, const Tensor& x, const RopeFrequencies& f, int64_t offset) {
  const backend::BackendScope scope(b);
  return rope(x, f, offset);
}

TEST(RopeScaledOp, BothBackendsMatchDirectF64Rotation) {
  const auto& cpu = backend::cpu_backend();
  const auto& ref = backend::reference_backend();
  for (const Scaled& c : scaled_cases()) {
    for (int64_t offset : {int64_t{0}, int64_t{131000}}) {
      const std::string what = std::string(c.name) + " offset " + std::to_string(offset);
      const double a = c.freqs.attention_factor;
      const Tensor x64 = randn({2, 3, 9, c.head_dim}, DType::f64, 61);
      const Tensor want64 = naive_rope(x64, c.freqs, offset);
      expect_close(on(cpu, x64, c.freqs, offset), want64, 1e-13, 1e-12, what + " cpu f64");
      expect_close(on(ref, x64, c.freqs, offset), want64, 1e-13, 1e-12, what + " ref f64");
      // f32: the reference rounds the f64 result once; cpu rounds a·cos, a·sin to f32 first.
      const Tensor x32 = randn({2, 3, 9, c.head_dim}, DType::f32, 62);
      const Tensor want32 = naive_rope(x32, c.freqs, offset);
      expect_close(on(ref, x32, c.freqs, offset), want32, 1e-30, 0x1p-24, what + " ref f32");
      expect_close(on(cpu, x32, c.freqs, offset), want32, 1e-6 * a, 4e-7 * 4, what + " cpu f32");
      // bf16: f32 math (cpu) or f64 (reference), one rounding each: at most one bf16 step.
      const Tensor x16 = x32.to(DType::bf16);
      const Tensor y_cpu = on(cpu, x16, c.freqs, offset), y_ref = on(ref, x16, c.freqs, offset);
      EXPECT_EQ(y_cpu.dtype(), DType::bf16);
      expect_close(y_cpu, y_ref, 1e-5 * a, 0x1p-7, what + " bf16 cpu vs ref");
      expect_close(y_ref, naive_rope(x16, c.freqs, offset), 1e-30, 0x1p-8, what + " bf16 ref");
      EXPECT_TRUE(same_bits(y_cpu, on(cpu, x16.to(DType::f32), c.freqs, offset).to(DType::bf16)))
          << what << ": bf16 is the f32 kernel rounded once";
    }
  }
}

TEST(RopeScaledOp, BackwardIsTransposedRotationTimesFactor) {
  for (const Scaled& c : scaled_cases()) {
    for (const auto* b : {&backend::cpu_backend(), &backend::reference_backend()}) {
      const backend::BackendScope scope(*b);
      const std::string what = std::string(c.name) + " on " + std::string(b->name);
      Tensor x = randn({2, 2, 7, c.head_dim}, DType::f64, 71).set_requires_grad(true, DType::f64);
      const Tensor g = randn({2, 2, 7, c.head_dim}, DType::f64, 72);
      rope(x, c.freqs, 4000).backward(g);
      expect_close(x.grad(), naive_rope(g, c.freqs, 4000, true), 1e-13, 1e-12, what);
      // a·(orthogonal): norms scale by a exactly.
      const std::vector<double> y = rope(x.detach(), c.freqs, 4000).to_doubles();
      const std::vector<double> xv = x.to_doubles();
      double ny = 0, nx = 0;
      for (size_t i = 0; i < y.size(); ++i) ny += y[i] * y[i], nx += xv[i] * xv[i];
      const double a = c.freqs.attention_factor;
      EXPECT_NEAR(ny, a * a * nx, 1e-10 * ny) << what;
      // bf16 input: the gradient arrives in f32, is rotated in f32 and rounded once.
      Tensor xl = x.detach().to(DType::bf16).set_requires_grad(true, DType::bf16);
      const Tensor g32 = g.to(DType::f32);
      rope(xl, c.freqs, 4000).backward(g32);
      EXPECT_EQ(xl.grad().dtype(), DType::bf16);
      expect_close(xl.grad(), naive_rope(g32, c.freqs, 4000, true), 1e-5 * a, 0x1p-7,
                   what + " bf16 grad");
    }
  }
}

TEST(RopeScaledOp, GradcheckF64) {
  const std::vector<Scaled> cases = scaled_cases();
  // Shrink each case's frequencies to a small head (every 8th pair) to keep gradcheck short.
  for (const Scaled& c : cases) {
    RopeFrequencies small{{}, c.freqs.attention_factor};
    for (size_t i = 0; i < c.freqs.inv_freq.size(); i += 8)
      small.inv_freq.push_back(c.freqs.inv_freq[i]);
    const int64_t dh = 2 * static_cast<int64_t>(small.inv_freq.size());
    expect_gradcheck([&](const std::vector<Tensor>& in) { return rope(in[0], small, 9000); },
                     {grad_input({1, 2, 3, dh}, 81)}, std::string("rope ") + c.name);
  }
}

TEST(RopeScaledOp, SameBitsWithOneAndTwoThreads) {
  const Scaled c = scaled_cases()[2];  // a != 1
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = randn({4, 4, 128, 128}, dt, 91), g = randn({4, 4, 128, 128}, dt, 92);
    auto run = [&] {
      Tensor xi = x.detach().set_requires_grad(true, dt);
      Tensor y = rope(xi, c.freqs, 3);
      y.backward(g);
      return std::pair{y.detach(), xi.grad()};
    };
    const auto one = with_threads(1, run), two = with_threads(2, run);
    EXPECT_TRUE(same_bits(one.first, two.first)) << dtype_name(dt);
    EXPECT_TRUE(same_bits(one.second, two.second)) << dtype_name(dt) << " grad";
  }
}

// The cpu kernel keeps the last cos/sin table: a new factor or frequency must not reuse it.
TEST(RopeScaledOp, CachedTableFollowsFrequenciesAndFactor) {
  const Tensor x = randn({1, 2, 5, 16}, DType::f32, 95);
  RopeFrequencies f = rope_frequencies(16, 10000);
  for (double a : {1.0, 1.5, 1.0, 0.5}) {
    f.attention_factor = a;
    expect_close(rope(x, f, 7), naive_rope(x, f, 7), 1e-6, 4e-7 * 4, "factor " + std::to_string(a));
  }
  f.inv_freq[3] *= 0.5;
  expect_close(rope(x, f, 7), naive_rope(x, f, 7), 1e-6, 4e-7 * 4, "one frequency changed");
}

TEST(RopeScaledOp, BadFrequencies) {
  const Tensor x = randn({1, 2, 3, 8}, DType::f32, 101);
  const RopeFrequencies good = rope_frequencies(8, 10000);
  EXPECT_NO_THROW(rope(x, good, 2));
  RopeFrequencies f = good;
  f.inv_freq.pop_back();
  EXPECT_NE(error_of([&] { rope(x, f); }).find("expects Dh/2 = 4 inverse frequencies, got 3"),
            std::string::npos);
  f = good;
  f.inv_freq[1] = NAN;
  EXPECT_THROW(rope(x, f), Error);
  for (double a : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    f = good;
    f.attention_factor = a;
    EXPECT_THROW(rope(x, f), Error) << a;
  }
  EXPECT_THROW(rope(x, good, -1), Error);
  EXPECT_THROW(rope(randn({1, 2, 3, 7}, DType::f32, 102), good), Error);
  // The kernels check the count themselves too.
  for (const auto* b : {&backend::cpu_backend(), &backend::reference_backend()})
    EXPECT_THROW(b->rope_rotate(x, std::vector<double>(3, 1.0), 1.0, 0, false, DType::f32), Error)
        << b->name;
}

// ---- the unscaled path keeps its bits ---------------------------------------------------------

// The cpu kernel as it was before frequencies became an argument: cos/sin of f64 angles
// position·theta^(-2i/Dh) rounded to the math type A, then the rotation in A.
template <class A>
Tensor old_cpu_rope(const Tensor& x, double theta, int64_t offset, bool inverse) {
  const int64_t t = x.size(2), dh = x.size(3), half = dh / 2;
  const Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const A* in = xc.data<A>();
  A* y = out.data<A>();
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dh));
  for (int64_t r = 0; r < x.numel() / dh; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(offset + r % t) * inv_freq[i];
      const A c = static_cast<A>(std::cos(angle)), s = static_cast<A>(std::sin(angle));
      const A x1 = in[r * dh + i], x2 = in[r * dh + i + half];
      y[r * dh + i] = inverse ? x1 * c + x2 * s : x1 * c - x2 * s;
      y[r * dh + i + half] = inverse ? x2 * c - x1 * s : x2 * c + x1 * s;
    }
  return out;
}

// The reference kernel as it was: everything f64, one rounding.
Tensor old_reference_rope(const Tensor& x, double theta, int64_t offset) {
  const int64_t t = x.size(2), dh = x.size(3), half = dh / 2;
  const std::vector<double> xv = x.to_doubles();
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < x.numel() / dh; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const double inv_freq =
          1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dh));
      const double angle = static_cast<double>(offset + r % t) * inv_freq;
      const double c = std::cos(angle), s = std::sin(angle);
      const auto a = static_cast<size_t>(r * dh + i), b = a + static_cast<size_t>(half);
      y[a] = xv[a] * c - xv[b] * s;
      y[b] = xv[b] * c + xv[a] * s;
    }
  return Tensor::from_doubles(y, x.shape(), DType::f64).to(x.dtype());
}

TEST(RopeScaledOp, UnscaledBitsUnchanged) {
  for (double theta : {10000.0, 500000.0})
    for (int64_t offset : {int64_t{0}, int64_t{5}, int64_t{70000}}) {
      const std::string what =
          "theta " + std::to_string(theta) + " offset " + std::to_string(offset);
      const RopeFrequencies f = rope_frequencies(64, theta);
      // f32 and f64 forward and backward on the cpu backend.
      const Tensor x32 = randn({2, 3, 37, 64}, DType::f32, 111);
      const Tensor g32 = randn({2, 3, 37, 64}, DType::f32, 112);
      Tensor xg = x32.detach().set_requires_grad(true, DType::f32);
      const Tensor y32 = rope(xg, theta, offset);
      EXPECT_TRUE(same_bits(y32, old_cpu_rope<float>(x32, theta, offset, false))) << what;
      EXPECT_TRUE(same_bits(rope(x32, f, offset), y32)) << what;
      y32.backward(g32);
      EXPECT_TRUE(same_bits(xg.grad(), old_cpu_rope<float>(g32, theta, offset, true))) << what;
      const Tensor x64 = randn({2, 3, 37, 64}, DType::f64, 113);
      EXPECT_TRUE(
          same_bits(rope(x64, theta, offset), old_cpu_rope<double>(x64, theta, offset, false)))
          << what << " f64";
      // bf16: the f32 kernel rounded once.
      const Tensor x16 = x32.to(DType::bf16);
      EXPECT_TRUE(
          same_bits(rope(x16, theta, offset),
                    old_cpu_rope<float>(x16.to(DType::f32), theta, offset, false).to(DType::bf16)))
          << what << " bf16";
      // The reference backend.
      const backend::BackendScope scope(backend::reference_backend());
      EXPECT_TRUE(same_bits(rope(x64, theta, offset), old_reference_rope(x64, theta, offset)))
          << what << " reference f64";
      EXPECT_TRUE(same_bits(rope(x32, theta, offset), old_reference_rope(x32, theta, offset)))
          << what << " reference f32";
    }
}

}  // namespace
}  // namespace mixprec
