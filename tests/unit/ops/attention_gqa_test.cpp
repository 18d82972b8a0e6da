// Grouped-query attention: k, v with fewer heads than q. Checked against the same op on k, v
// repeated to every query head (HF's repeat_kv): the outputs and dq bit for bit, dk and dv as
// the sum over each group of the repeated heads' gradients; against the reference backend;
// f64 finite differences; the projection layouts; thread counts; bad head counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mixprec/backend/backend.h"
#include "mixprec/ops/attention.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

// kv [B, Hkv, T, D] -> [B, Hkv·group, T, D]: kv head j copied to query heads j·group + i.
Tensor repeat_kv(const Tensor& kv, int64_t group) {
  const int64_t B = kv.size(0), Hkv = kv.size(1), T = kv.size(2), D = kv.size(3);
  const std::vector<double> x = kv.to_doubles();
  std::vector<double> y;
  y.reserve(x.size() * static_cast<size_t>(group));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < Hkv; ++j)
      for (int64_t i = 0; i < group; ++i) {
        const auto first = x.begin() + ((b * Hkv + j) * T * D);
        y.insert(y.end(), first, first + T * D);
      }
  return Tensor::from_doubles(y, {B, Hkv * group, T, D}, kv.dtype());
}

// A repeated head's gradient [B, H, T, D] summed over each group -> [B, H / group, T, D], in f64.
Tensor sum_groups(const Tensor& g, int64_t group) {
  const int64_t B = g.size(0), H = g.size(1), T = g.size(2), D = g.size(3), Hkv = H / group;
  const std::vector<double> x = g.to_doubles();
  std::vector<double> y(static_cast<size_t>(B * Hkv * T * D), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t e = 0; e < T * D; ++e)
        y[static_cast<size_t>((b * Hkv + h / group) * T * D + e)] +=
            x[static_cast<size_t>((b * H + h) * T * D + e)];
  return Tensor::from_doubles(y, {B, Hkv, T, D}, DType::f64);
}

struct Grads {
  Tensor out, dq, dk, dv;
};

Grads run(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& dout, bool causal) {
  Tensor q = q0.detach().set_requires_grad(true, q0.dtype());
  Tensor k = k0.detach().set_requires_grad(true, k0.dtype());
  Tensor v = v0.detach().set_requires_grad(true, v0.dtype());
  Tensor out = scaled_dot_product_attention(q, k, v, causal);
  out.backward(dout);
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(AttentionGqa, EqualsRepeatedKeysAndValues) {
  // 4 query heads per key/value head; 150 rows: two blocks, the second partial.
  for (DType dt : {DType::f64, DType::f32, DType::bf16}) {
    const int64_t group = 4;
    const Tensor q = randn({2, 8, 150, 16}, dt, 1), k = randn({2, 2, 150, 16}, dt, 2),
                 v = randn({2, 2, 150, 16}, dt, 3), g = randn({2, 8, 150, 16}, dt, 4);
    for (bool causal : {true, false}) {
      const std::string what = std::string(dtype_name(dt)) + (causal ? " causal" : "");
      const Grads gqa = run(q, k, v, g, causal);
      const Grads mha = run(q, repeat_kv(k, group), repeat_kv(v, group), g, causal);
      EXPECT_TRUE(same_bits(gqa.out, mha.out)) << what << " out";
      EXPECT_TRUE(same_bits(gqa.dq, mha.dq)) << what << " dq";
      ASSERT_EQ(gqa.dk.shape(), k.shape()) << what;
      ASSERT_EQ(gqa.dv.shape(), v.shape()) << what;
      // dk, dv: the group's sum, accumulated in f32 (f64) and rounded once; bf16 ends within
      // one rounding of the f64 sum of the repeated heads' (themselves rounded) gradients.
      const double rtol = dt == DType::f64 ? 1e-13 : dt == DType::f32 ? 1e-5 : 1.6e-2;
      expect_close(gqa.dk.to(DType::f64), sum_groups(mha.dk, group), rtol, rtol, what + " dk");
      expect_close(gqa.dv.to(DType::f64), sum_groups(mha.dv, group), rtol, rtol, what + " dv");
    }
  }
}

TEST(AttentionGqa, CpuKernelMatchesReferenceBackend) {
  // Two sequences: the batch part of the head mapping too.
  const Tensor q = randn({2, 6, 70, 8}, DType::f64, 11), k = randn({2, 3, 70, 8}, DType::f64, 12),
               v = randn({2, 3, 70, 8}, DType::f64, 13), g = randn({2, 6, 70, 8}, DType::f64, 14);
  const double scale = 0.35;
  for (bool causal : {true, false}) {
    const auto& cpu = backend::cpu_backend();
    const auto& ref = backend::reference_backend();
    const backend::AttentionForward fc = cpu.attention_forward(q, k, v, causal, scale, false);
    const backend::AttentionForward fr = ref.attention_forward(q, k, v, causal, scale, false);
    expect_close(fc.out, fr.out, 1e-13, 1e-12, "out");
    expect_close(fc.lse, fr.lse, 1e-13, 1e-12, "lse");
    const backend::AttentionGrads gc =
        cpu.attention_backward(q, k, v, fc.out, fc.lse, g, causal, scale);
    const backend::AttentionGrads gr =
        ref.attention_backward(q, k, v, fr.out, fr.lse, g, causal, scale);
    expect_close(gc.dq, gr.dq, 1e-12, 1e-11, "dq");
    expect_close(gc.dk, gr.dk, 1e-12, 1e-11, "dk");
    expect_close(gc.dv, gr.dv, 1e-12, 1e-11, "dv");
  }
}

TEST(AttentionGqa, GradcheckF64) {
  for (bool causal : {true, false})
    expect_gradcheck(
        [=](const std::vector<Tensor>& in) {
          return scaled_dot_product_attention(in[0], in[1], in[2], causal);
        },
        {grad_input({2, 4, 6, 3}, 21), grad_input({2, 2, 6, 3}, 22), grad_input({2, 2, 6, 3}, 23)},
        causal ? "causal GQA" : "GQA");
  // Multi-query attention: one key/value head for all query heads.
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], true);
      },
      {grad_input({1, 3, 5, 2}, 24), grad_input({1, 1, 5, 2}, 25), grad_input({1, 1, 5, 2}, 26)},
      "MQA");
}

TEST(AttentionGqa, ProjectionLayoutsAndThreadsGiveTheSameBits) {
  // A model's projections: [B, T, H·D] seen as [B, H, T, D] (strided), k, v with Hkv heads.
  const int64_t B = 2, T = 140, H = 6, Hkv = 2, D = 32;
  for (DType dt : {DType::f32, DType::bf16}) {
    auto heads = [&](int64_t n, uint64_t seed) {
      return randn({B, T, n * D}, dt, seed).view({B, T, n, D}).permute({0, 2, 1, 3});
    };
    const Tensor q = heads(H, 31), k = heads(Hkv, 32), v = heads(Hkv, 33);
    const Tensor g = randn({B, H, T, D}, dt, 34);
    const Grads strided = with_threads(2, [&] { return run(q, k, v, g, true); });
    const Grads dense = with_threads(
        1, [&] { return run(q.contiguous(), k.contiguous(), v.contiguous(), g, true); });
    const std::string what = dtype_name(dt);
    EXPECT_TRUE(same_bits(strided.out.contiguous(), dense.out)) << what;
    EXPECT_TRUE(same_bits(strided.dq.contiguous(), dense.dq)) << what;
    EXPECT_TRUE(same_bits(strided.dk.contiguous(), dense.dk)) << what;
    EXPECT_TRUE(same_bits(strided.dv.contiguous(), dense.dv)) << what;
  }
}

TEST(AttentionGqa, HeadCountsThatDoNotDivideAreRefused) {
  const Tensor q = randn({1, 6, 5, 4}, DType::f32, 41);
  const Tensor k4 = randn({1, 4, 5, 4}, DType::f32, 42);
  const std::string e = error_of([&] { scaled_dot_product_attention(q, k4, k4); });
  EXPECT_NE(e.find("Hkv dividing H"), std::string::npos) << e;
  EXPECT_NE(e.find("[1, 4, 5, 4]"), std::string::npos) << e;
  const Tensor k2 = randn({1, 2, 5, 4}, DType::f32, 43), k3 = randn({1, 3, 5, 4}, DType::f32, 44);
  EXPECT_THROW(scaled_dot_product_attention(q, k2, k3), Error);  // k and v differ
  // More keys than queries: only without the causal mask, and only without gradients.
  const Tensor k6 = randn({1, 2, 6, 4}, DType::f32, 45);
  EXPECT_NE(error_of([&] { scaled_dot_product_attention(q, k6, k6, true); }).find("Tk > T"),
            std::string::npos);
  EXPECT_NO_THROW(scaled_dot_product_attention(q, k6, k6, false));
  Tensor qg = q.detach().set_requires_grad(true);
  EXPECT_NE(error_of([&] { scaled_dot_product_attention(qg, k6, k6, false); }).find("decoding"),
            std::string::npos);
  EXPECT_THROW(scaled_dot_product_attention(q, randn({1, 2, 4, 4}, DType::f32, 46),
                                            randn({1, 2, 4, 4}, DType::f32, 47), false),
               Error);  // fewer keys than queries
  EXPECT_THROW(scaled_dot_product_attention(q, Tensor::zeros({1, 0, 5, 4}, DType::f32),
                                            Tensor::zeros({1, 0, 5, 4}, DType::f32)),
               Error);
}

}  // namespace
}  // namespace mixprec
