// ParameterSet: sizes known before allocation, init keyed by name (not by order), GPT-2 init
// statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mixprec/models/parameter_set.h"
#include "mixprec/models/transformer/transformer.h"
#include "mixprec/tensor/allocator.h"
#include "models_testing.h"
#include "support/op_testing.h"

namespace mixprec::models {
namespace {

using mixprec::testing::same_bits;
using testing::fp32_policy;
using testing::tiny_config;

std::vector<ParamSpec> three_specs() {
  return {{"a.weight", {8, 4}, {}, {InitKind::normal, 0.02}},
          {"a.bias", {8}, {.no_weight_decay = true}, {InitKind::zeros}},
          {"b.weight", {5, 3}, {}, {InitKind::normal, 0.5}}};
}

TEST(ParameterSet, CountsAndBytesBeforeMaterializing) {
  ParameterSet set;
  for (ParamSpec& s : three_specs()) set.add(s);
  EXPECT_EQ(set.parameter_count(), 32 + 8 + 15);
  EXPECT_FALSE(set.materialized());
  EXPECT_TRUE(set.spec("b.weight").meta().is_meta());
  const ParameterBytes fp32 = set.bytes(amp::preset("fp32"));
  EXPECT_EQ(fp32.master, 55u * 4);
  EXPECT_EQ(fp32.working, 0u);  // one tensor when master and working dtypes agree
  EXPECT_EQ(fp32.grads, 55u * 4);
  const ParameterBytes bf16 = set.bytes(amp::preset("bf16-mixed"));
  EXPECT_EQ(bf16.master, 55u * 4);
  EXPECT_EQ(bf16.working, 55u * 2);
  EXPECT_EQ(bf16.grads, 55u * 4);
  EXPECT_EQ(bf16.total(), 55u * 10);
  EXPECT_THROW(set.add({"a.bias", {2}}), Error);
  EXPECT_THROW(set.value("a.weight"), Error);  // not materialized
}

TEST(ParameterSet, DescribingAModelAllocatesNothing) {
  const std::size_t before = Allocator::instance().stats().current_bytes;
  config::ModelConfig c = tiny_config("moe");
  c.d_model = 512;
  c.d_ff = 2048;
  c.vocab_size = 32000;
  const Transformer model = testing::transformer(c);
  // tok_emb 32000·512 + 2 blocks · (2 norms 1024 + attention 4·512² + router 4·512 +
  // 4 experts · 3·2048·512) + final norm 512
  EXPECT_EQ(model.parameters().parameter_count(),
            16'384'000 + 2 * (1024 + 1'048'576 + 2048 + 12'582'912) + 512);
  EXPECT_EQ(Allocator::instance().stats().current_bytes, before);
}

TEST(ParameterSet, MaterializedValuesDoNotDependOnOrder) {
  ParameterSet forward_order, reverse_order;
  std::vector<ParamSpec> specs = three_specs();
  for (const ParamSpec& s : specs) forward_order.add(s);
  std::reverse(specs.begin(), specs.end());
  for (const ParamSpec& s : specs) reverse_order.add(s);
  forward_order.materialize(7, fp32_policy());
  reverse_order.materialize(7, fp32_policy());
  for (const ParamSpec& s : specs)
    EXPECT_TRUE(same_bits(forward_order.value(s.name), reverse_order.value(s.name))) << s.name;
  EXPECT_EQ(forward_order.entries()[0].first, "a.weight");
  EXPECT_EQ(reverse_order.entries()[0].first, "b.weight");
}

TEST(ParameterSet, ValuesAreTheNamedPhiloxStream) {
  ParameterSet set;
  set.add({"w", {3, 2}, {}, {InitKind::normal, 0.5}});
  set.materialize(99, fp32_policy());
  const std::vector<double> got = set.value("w").to_doubles();
  for (uint64_t i = 0; i < 6; ++i) {
    const double expect = 0.5 * Generator::standard_normal(99, name_stream("w"), i);
    EXPECT_EQ(got[i], static_cast<double>(static_cast<float>(expect))) << i;
  }
  EXPECT_EQ(name_stream(""), 0xcbf29ce484222325ull);  // FNV-1a test vectors
  EXPECT_EQ(name_stream("a"), 0xaf63dc4c8601ec8cull);
}

TEST(ParameterSet, SeedsAndNamesGiveDifferentValues) {
  ParameterSet a, b;
  a.add({"x.weight", {16, 16}});
  a.add({"y.weight", {16, 16}});
  b.add({"x.weight", {16, 16}});
  a.materialize(1, fp32_policy());
  b.materialize(2, fp32_policy());
  EXPECT_FALSE(same_bits(a.value("x.weight"), b.value("x.weight")));
  EXPECT_FALSE(same_bits(a.value("x.weight"), a.value("y.weight")));
}

double std_of(const Tensor& t) {
  const std::vector<double> v = t.to_doubles();
  double s = 0, s2 = 0;
  for (double x : v) {
    s += x;
    s2 += x * x;
  }
  const double n = static_cast<double>(v.size()), m = s / n;
  return std::sqrt(s2 / n - m * m);
}

TEST(ParameterSet, Gpt2InitStatistics) {
  config::ModelConfig c = tiny_config("gpt");
  c.d_model = 128;
  c.d_ff = 512;
  c.n_layers = 8;
  c.vocab_size = 256;
  c.norm = "layernorm";
  Transformer model = testing::transformer(c);
  model.materialize(3, amp::preset("bf16-mixed"));
  const ParameterSet& p = model.parameters();
  // 128x128 = 16384 samples: the sample std is within ~1% of the truth (5 sigma ~ 3%).
  EXPECT_NEAR(std_of(p.at("blocks.0.attn.wq").master()), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(p.at("tok_emb.weight").master()), 0.02, 0.02 * 0.03);
  EXPECT_NEAR(std_of(p.at("blocks.5.mlp.w_down").master()), 0.02 / 4.0, 0.005 * 0.03);
  EXPECT_NEAR(std_of(p.at("blocks.5.attn.wo").master()), 0.02 / 4.0, 0.005 * 0.03);
  for (double v : p.at("blocks.1.mlp_norm.weight").master().to_doubles()) EXPECT_EQ(v, 1.0);
  for (double v : p.at("final_norm.bias").master().to_doubles()) EXPECT_EQ(v, 0.0);
  EXPECT_TRUE(p.at("final_norm.bias").role().no_weight_decay);
  EXPECT_TRUE(p.at("blocks.0.attn_norm.weight").role().no_weight_decay);
  EXPECT_FALSE(p.at("blocks.0.attn.wv").role().no_weight_decay);
  EXPECT_EQ(p.at("blocks.0.attn.wk").role().heads, 2);
  EXPECT_EQ(p.at("blocks.0.attn.wq").master().dtype(), DType::f32);
  EXPECT_EQ(p.at("blocks.0.attn.wq").value().dtype(), DType::bf16);
}

}  // namespace
}  // namespace mixprec::models
