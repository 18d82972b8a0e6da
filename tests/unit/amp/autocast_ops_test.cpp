// Every op in the autocast table under bf16 and f16 autocast: the output dtype its category
// promises, and the same bits as the same casts written by hand outside any guard (each
// expectation below spells its casts out; none is derived from the table). Gradients too for
// a few ops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/models/transformer/gpt_block.h"
#include "mixprec/ops.h"
#include "support/op_registry.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::randn;
using mixprec::testing::same_bits;

constexpr DType f32 = DType::f32;

struct OpCase {
  std::string op;
  std::function<Tensor()> run;     // called inside the guard, on the inputs as given
  std::function<Tensor()> manual;  // called outside any guard, with the casts by hand
  DType expected;                  // the output dtype
};

Tensor ids(std::vector<int64_t> v, Shape shape = {}) {
  return Tensor::from_vector(v, std::move(shape));
}

// The cases for autocast dtype d. Lower-precision ops get f32 inputs, fp32 ops get d inputs,
// promote ops mix f32 and d, as_given ops get d inputs (and must leave them alone).
std::vector<OpCase> cases(DType d) {
  const Tensor a = randn({8, 40}, f32, 1), b = randn({40, 12}, f32, 2);
  const Tensor a3 = randn({2, 8, 40}, f32, 3), b3 = randn({2, 40, 12}, f32, 4);
  const Tensor w = randn({12, 40}, f32, 5, 0.1), bias = randn({12}, f32, 6);
  const Tensor q = randn({1, 2, 8, 16}, f32, 7), k = randn({1, 2, 8, 16}, f32, 8),
               v = randn({1, 2, 8, 16}, f32, 9);
  const Tensor xd = randn({4, 40}, d, 10), wd = randn({40}, d, 11), bd = randn({40}, d, 12);
  const Tensor logits = randn({4, 10}, d, 13);
  const Tensor targets = ids({1, 0, 9, 3});
  const Tensor rowf = randn({4, 40}, f32, 14), rowd = randn({40}, d, 15);
  const Tensor qd = randn({1, 2, 8, 16}, d, 16);
  const Tensor table = randn({10, 8}, d, 17);
  const Tensor sx = randn({4, 6}, f32, 18), ssrc = randn({2, 6}, d, 19);
  const Tensor sidx = ids({3, 0, 1, 2, 0, 3, 2, 2, 1, 0, 3, 1}, {2, 6});
  const Tensor ix = randn({5, 3}, d, 20), isrc = randn({2, 3}, f32, 21);
  const Tensor gidx = ids({1, 0, 3, 2, 2, 1, 0, 0}, {4, 2});
  const Tensor pos = [&] {  // |x| + 0.1 in d: inside every pointwise function's domain
    std::vector<double> v = randn({4, 40}, f32, 22).to_doubles();
    for (double& e : v) e = std::fabs(e) + 0.1;
    return Tensor::from_doubles(v, {4, 40}, d);
  }();
  const auto fp32_case = [&](const std::string& op, auto f) {
    return OpCase{op, [=] { return f(pos); }, [=] { return f(pos.to(f32)); }, f32};
  };
  return {
      {"matmul", [=] { return matmul(a, b); }, [=] { return matmul(a.to(d), b.to(d)); }, d},
      {"bmm", [=] { return bmm(a3, b3); }, [=] { return bmm(a3.to(d), b3.to(d)); }, d},
      {"linear", [=] { return linear(a, w, bias); },
       [=] { return linear(a.to(d), w.to(d), bias.to(d)); }, d},
      {"scaled_dot_product_attention", [=] { return scaled_dot_product_attention(q, k, v); },
       [=] { return scaled_dot_product_attention(q.to(d), k.to(d), v.to(d)); }, d},
      {"softmax", [=] { return softmax(xd); }, [=] { return softmax(xd.to(f32)); }, f32},
      {"log_softmax", [=] { return log_softmax(xd, 0); },
       [=] { return log_softmax(xd.to(f32), 0); }, f32},
      {"rmsnorm", [=] { return rmsnorm(xd, wd); }, [=] { return rmsnorm(xd.to(f32), wd.to(f32)); },
       f32},
      {"layernorm", [=] { return layernorm(xd, wd, bd); },
       [=] { return layernorm(xd.to(f32), wd.to(f32), bd.to(f32)); }, f32},
      {"cross_entropy", [=] { return cross_entropy(logits, targets); },
       [=] { return cross_entropy(logits.to(f32), targets); }, f32},
      {"sum", [=] { return sum(xd); }, [=] { return sum(xd.to(f32)); }, f32},
      {"sum", [=] { return sum(xd, 1, true); }, [=] { return sum(xd.to(f32), 1, true); }, f32},
      {"mean", [=] { return mean(xd, 0); }, [=] { return mean(xd.to(f32), 0); }, f32},
      {"norm", [=] { return norm(xd); }, [=] { return norm(xd.to(f32)); }, f32},
      {"add", [=] { return add(rowf, rowd); }, [=] { return add(rowf, rowd.to(f32)); }, f32},
      {"add", [=] { return add(xd, rowd); }, [=] { return add(xd, rowd); }, d},  // no cast
      {"sub", [=] { return sub(rowd, rowf); }, [=] { return sub(rowd.to(f32), rowf); }, f32},
      {"mul", [=] { return mul(rowf, rowd); }, [=] { return mul(rowf, rowd.to(f32)); }, f32},
      {"div", [=] { return div(rowd, rowf); }, [=] { return div(rowd.to(f32), rowf); }, f32},
      {"swiglu", [=] { return swiglu(rowf, xd); }, [=] { return swiglu(rowf, xd.to(f32)); }, f32},
      {"concat",
       [=] {
         return concat({rowf, xd, rowf}, 0);
       },
       [=] {
         return concat({rowf, xd.to(f32), rowf}, 0);
       },
       f32},
      {"scatter_add", [=] { return scatter_add(sx, 0, sidx, ssrc); },
       [=] { return scatter_add(sx, 0, sidx, ssrc.to(f32)); }, f32},
      {"index_add",
       [=] {
         return index_add(ix, 0, ids({4, 1}), isrc, 0.5);
       },
       [=] {
         return index_add(ix.to(f32), 0, ids({4, 1}), isrc, 0.5);
       },
       f32},
      {"gelu", [=] { return gelu(xd); }, [=] { return gelu(xd); }, d},
      {"gelu_tanh", [=] { return gelu_tanh(xd); }, [=] { return gelu_tanh(xd); }, d},
      {"silu", [=] { return silu(xd); }, [=] { return silu(xd); }, d},
      {"dropout", [=] { return dropout(xd, 0.25, 7); }, [=] { return dropout(xd, 0.25, 7); }, d},
      {"scale", [=] { return scale(xd, 0.37); }, [=] { return scale(xd, 0.37); }, d},
      {"rope", [=] { return rope(qd); }, [=] { return rope(qd); }, d},
      {"embedding",
       [=] {
         return embedding(ids({3, 9, 0}), table);
       },
       [=] {
         return embedding(ids({3, 9, 0}), table);
       },
       d},
      {"gather", [=] { return gather(xd, 1, gidx); }, [=] { return gather(xd, 1, gidx); }, d},
      {"topk", [=] { return topk(xd, 3).first; }, [=] { return topk(xd, 3).first; }, d},
      {"max", [=] { return max(xd); }, [=] { return max(xd); }, d},
      fp32_case("exp", mixprec::exp),
      fp32_case("log", mixprec::log),
      fp32_case("log1p", mixprec::log1p),
      fp32_case("expm1", mixprec::expm1),
      fp32_case("sqrt", mixprec::sqrt),
      fp32_case("rsqrt", mixprec::rsqrt),
      fp32_case("reciprocal", mixprec::reciprocal),
      fp32_case("tanh", mixprec::tanh),
      {"softplus", [=] { return softplus(xd, 2.0, 1.0); },
       [=] { return softplus(xd.to(f32), 2.0, 1.0); }, f32},
      {"pow", [=] { return mixprec::pow(pos, 2.5); },
       [=] { return mixprec::pow(pos.to(f32), 2.5); }, f32},
      {"pow", [=] { return mixprec::pow(pos, rowd); },
       [=] { return mixprec::pow(pos.to(f32), rowd.to(f32)); }, f32},
      // The matmul family: f32 operands meet in d.
      {"mm", [=] { return mm(a, b); }, [=] { return mm(a.to(d), b.to(d)); }, d},
      {"mv", [=] { return mv(a, rowf.select(0, 0)); },
       [=] { return mv(a.to(d), rowf.select(0, 0).to(d)); }, d},
      // torch.dot is on PyTorch's promote list (autocast_mode.h AT_FORALL_PROMOTE): f32 wins.
      {"dot", [=] { return dot(rowf.select(0, 1), rowd); },
       [=] { return dot(rowf.select(0, 1), rowd.to(f32)); }, f32},
      {"addmm", [=] { return addmm(bias, a, b); },
       [=] { return addmm(bias.to(d), a.to(d), b.to(d)); }, d},
      {"baddbmm", [=] { return baddbmm(bias, a3, b3, 0.5, 2.0); },
       [=] { return baddbmm(bias.to(d), a3.to(d), b3.to(d), 0.5, 2.0); }, d},
      {"einsum",
       [=] {
         return einsum("bij,bjk->bik", {a3, b3});
       },
       [=] {
         return einsum("bij,bjk->bik", {a3.to(d), b3.to(d)});
       },
       d},
      // fp32 reductions and losses: d inputs widen to f32.
      fp32_case("cumsum", [](const Tensor& x) { return cumsum(x, 1); }),
      fp32_case("prod", [](const Tensor& x) { return prod(x, 0); }),
      fp32_case("logsumexp", [](const Tensor& x) { return logsumexp(x, 1); }),
      {"norm", [=] { return vector_norm(xd, 1.0, 1); },
       [=] { return vector_norm(xd.to(f32), 1.0, 1); }, f32},
      {"mse_loss", [=] { return mse_loss(xd, rowf); }, [=] { return mse_loss(xd.to(f32), rowf); },
       f32},
      {"l1_loss", [=] { return l1_loss(rowd, xd); },
       [=] { return l1_loss(rowd.to(f32), xd.to(f32)); }, f32},
      {"smooth_l1_loss", [=] { return smooth_l1_loss(xd, rowd, Reduction::sum, 0.5); },
       [=] { return smooth_l1_loss(xd.to(f32), rowd.to(f32), Reduction::sum, 0.5); }, f32},
      {"kl_div", [=] { return kl_div(xd, pos, Reduction::batchmean); },
       [=] { return kl_div(xd.to(f32), pos.to(f32), Reduction::batchmean); }, f32},
      {"binary_cross_entropy_with_logits",
       [=] { return binary_cross_entropy_with_logits(xd, pos, {}, rowd); },
       [=] { return binary_cross_entropy_with_logits(xd.to(f32), pos.to(f32), {}, rowd.to(f32)); },
       f32},
      {"nll_loss", [=] { return nll_loss(logits, targets); },
       [=] { return nll_loss(logits.to(f32), targets); }, f32},
      {"cosine_similarity", [=] { return cosine_similarity(xd, rowd); },
       [=] { return cosine_similarity(xd.to(f32), rowd.to(f32)); }, f32},
      // promote: mixed f32 / d inputs meet in f32.
      {"stack",
       [=] {
         return stack({rowf, xd});
       },
       [=] {
         return stack({rowf, xd.to(f32)});
       },
       f32},
      {"addcmul", [=] { return addcmul(xd, rowf, rowd, 0.5); },
       [=] { return addcmul(xd.to(f32), rowf, rowd.to(f32), 0.5); }, f32},
      {"addcdiv", [=] { return addcdiv(rowf, xd, pos, -2.0); },
       [=] { return addcdiv(rowf, xd.to(f32), pos.to(f32), -2.0); }, f32},
      {"where", [=] { return where(gt(xd, 0.0), rowf, rowd); },
       [=] { return where(gt(xd, 0.0), rowf, rowd.to(f32)); }, f32},
      {"index_put",
       [=] {
         return index_put(rowf, {ids({3, 1})}, xd.slice(0, 0, 2));
       },
       [=] {
         return index_put(rowf, {ids({3, 1})}, xd.slice(0, 0, 2).to(f32));
       },
       f32},
  };
}

TEST(AutocastOps, EveryTableOpMatchesHandCastsUnderBf16AndF16) {
  for (DType d : {DType::bf16, DType::f16}) {
    std::set<std::string> covered{"moe_router"};  // a hook for models; tested below
    for (const OpCase& c : cases(d)) {
      SCOPED_TRACE(c.op + " under " + dtype_name(d));
      covered.insert(c.op);
      Tensor got;
      {
        AutocastGuard guard(d);
        got = c.run();
      }
      const Tensor want = c.manual();
      EXPECT_EQ(got.dtype(), c.expected);
      EXPECT_EQ(want.dtype(), c.expected);  // the hand casts mean what the test says
      EXPECT_TRUE(same_bits(got, want));
    }
    for (const AutocastRule& rule : kAutocastTable)
      EXPECT_TRUE(covered.count(std::string(rule.op))) << rule.op << " has no test case";
  }
}

// The casts a table row asks for, written out: what `input` becomes under autocast dtype d.
Tensor cast_for(CastCategory category, const Tensor& input, DType widest, DType d) {
  const DType t = input.dtype();
  if (!is_floating(t) || t == DType::f64) return input;
  switch (category) {
    case CastCategory::lower_precision:
      return input.to(d);
    case CastCategory::fp32:
      return input.to(f32);
    case CastCategory::promote:
      return input.to(widest);
    case CastCategory::as_given:
      return input;
  }
  return input;
}

// Every case of the op registry (tests/support/op_registry.h) under bf16 and f16 autocast,
// its first floating input f32 and the others d (so promote has something to widen), against
// the same op run outside any guard on inputs cast as its table row says: the same bits,
// forward and backward.
TEST(AutocastOps, EveryRegistryCaseFollowsItsTableRow) {
  std::set<std::string> covered;
  for (const AutocastOpTable table :
       {AutocastOpTable::mixprec, AutocastOpTable::torch_cuda, AutocastOpTable::torch_cpu})
    for (DType d : {DType::bf16, DType::f16}) {
      for (const auto& [name, op] : mixprec::testing::op_registry()) {
        if (op.op.empty() || op.composite) continue;  // views (no row), several ops
        covered.insert(op.op);
        SCOPED_TRACE(name + " under " + dtype_name(d) + ", table " +
                     std::string(kAutocastOpTableNames[static_cast<std::size_t>(table)]));
        const int row = find_autocast_op(op.op);
        ASSERT_GE(row, 0) << op.op << " is not in the autocast table";
        const AutocastRule& rule = kAutocastTable[static_cast<std::size_t>(row)];
        // An op PyTorch leaves as given but mixprec casts meets its inputs at the widest dtype.
        const CastCategory category =
            rule.in(table) == CastCategory::as_given && rule.category != CastCategory::as_given
                ? CastCategory::promote
                : rule.in(table);
        auto inputs = [&] {
          mixprec::testing::Tensors in = mixprec::testing::case_inputs(name, d);
          for (auto& [n, t] : in)
            if (is_floating(t.dtype())) {
              t = t.detach().to(f32).set_requires_grad(true, f32);
              break;
            }
          return in;
        };
        auto run = [&](mixprec::testing::Tensors in, bool autocast, DType widest) {
          mixprec::testing::Tensors given = in;
          if (!autocast)
            for (auto& [n, t] : given) t = cast_for(category, t, widest, d);
          mixprec::testing::Tensors out;
          {
            AutocastGuard guard(d, AutocastOptions{.op_table = table}, autocast);
            out = op.run(given);
          }
          const Tensor& primary = out.at(mixprec::testing::primary_output(out));
          if (primary.requires_grad()) mixprec::sum(primary).backward();
          for (auto& [n, t] : in)
            if (t.requires_grad()) out["grad_" + n] = t.grad();
          return out;
        };
        const auto a = run(inputs(), true, f32);
        const auto b = run(inputs(), false, f32);
        for (const auto& [key, t] : a) {
          ASSERT_TRUE(b.count(key)) << key;
          EXPECT_TRUE(same_bits(t, b.at(key))) << key;
        }
      }
    }
  for (const AutocastRule& rule : kAutocastTable)
    EXPECT_TRUE(covered.count(std::string(rule.op))) << rule.op << " has no registry case";
}

TEST(AutocastOps, AsGivenOpsMakeNoCasts) {
  const Tensor x = randn({4, 16}, DType::bf16, 30), xf = randn({4, 16}, f32, 31);
  AutocastGuard guard(DType::bf16);
  EXPECT_EQ(gelu(x).dtype(), DType::bf16);
  EXPECT_EQ(silu(xf).dtype(), f32);  // f32 stays f32 too
  EXPECT_EQ(topk(xf, 2).first.dtype(), f32);
  EXPECT_EQ(autocast_stats().casts, 0);
}

TEST(AutocastOps, PromoteMixesBf16AndF16IntoF32AndKeepsF64) {
  const Tensor b = randn({8}, DType::bf16, 32), h = randn({8}, DType::f16, 33);
  const Tensor f64 = randn({8}, DType::f64, 34);
  AutocastGuard guard(DType::bf16);
  const Tensor bh = add(b, h);
  EXPECT_EQ(bh.dtype(), f32);
  EXPECT_TRUE(same_bits(bh, add(b.to(f32), h.to(f32))));
  EXPECT_EQ(mul(f64, b).dtype(), DType::f64);
  // Lower precision leaves f64 alone (as PyTorch does): an f64 matmul stays f64.
  const Tensor m = randn({4, 4}, DType::f64, 35);
  EXPECT_EQ(matmul(m, m).dtype(), DType::f64);
}

// PyTorch's autocast casts only eligible floating tensors (is_eligible: not f64): f64 and
// integer inputs pass through uncast. So an f64 operand meets a bf16-cast one in a matmul,
// which is an error naming both dtypes (torch: "expected scalar type Double but found
// BFloat16"), never a silent cast of the f64 one.
TEST(AutocastOps, F64AndIntegerInputsPassUncastAndMixedF64MatmulIsAnError) {
  const Tensor m64 = randn({4, 4}, DType::f64, 37), m32 = randn({4, 4}, f32, 38);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 0}, {4});
  AutocastGuard guard(DType::bf16);
  const std::string msg = mixprec::testing::error_of([&] { matmul(m64, m32); });
  EXPECT_NE(msg.find("f64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  EXPECT_EQ(mixprec::exp(m64).dtype(), DType::f64);  // an fp32 op leaves f64 alone
  EXPECT_EQ(sum(m64).dtype(), DType::f64);
  const Tensor table = randn({4, 3}, f32, 39);
  EXPECT_EQ(embedding(ids, table).dtype(), f32);  // ids untouched, as_given table
  EXPECT_EQ(add(ids, randn({4}, DType::bf16, 40)).dtype(), DType::bf16);  // i64 joins as bf16
  EXPECT_EQ(autocast_stats().casts, 1);  // m32 to bf16, nothing else
}

TEST(AutocastOps, MoeRouterHookRunsInF32) {
  const Tensor logits = randn({6, 4}, DType::bf16, 36);
  {
    const auto [off] = autocast_args("moe_router", logits);
    EXPECT_EQ(&off, &logits);
  }
  AutocastGuard guard(DType::bf16);
  const auto [r] = autocast_args("moe_router", logits);
  EXPECT_EQ(r.dtype(), f32);
  EXPECT_TRUE(same_bits(r, logits.to(f32)));
}

TEST(AutocastOps, LinearGradientsMatchHandCasts) {
  for (DType d : {DType::bf16, DType::f16}) {
    Tensor x = randn({6, 40}, f32, 40).set_requires_grad();
    Tensor w = randn({12, 40}, f32, 41, 0.1).set_requires_grad();
    Tensor b = randn({12}, f32, 42).set_requires_grad();
    Tensor x2 = x.detach().clone().set_requires_grad();
    Tensor w2 = w.detach().clone().set_requires_grad();
    Tensor b2 = b.detach().clone().set_requires_grad();
    const Tensor gy = randn({6, 12}, d, 43);
    {
      AutocastGuard guard(d);
      linear(x, w, b).backward(gy);
    }
    linear(x2.to(d), w2.to(d), b2.to(d)).backward(gy);
    for (auto [got, want] : {std::pair{x, x2}, std::pair{w, w2}, std::pair{b, b2}}) {
      EXPECT_EQ(got.grad().dtype(), f32);  // the f32 weight's own gradient dtype
      EXPECT_TRUE(same_bits(got.grad(), want.grad())) << dtype_name(d);
    }
  }
}

TEST(AutocastOps, SoftmaxCrossEntropyAndAddGradientsMatchHandCasts) {
  const DType d = DType::bf16;
  Tensor x = randn({4, 10}, d, 50).set_requires_grad(true, d);
  Tensor x2 = x.detach().clone().set_requires_grad(true, d);
  Tensor r = randn({10}, f32, 51).set_requires_grad();
  Tensor r2 = r.detach().clone().set_requires_grad();
  const Tensor t = ids({2, 0, 9, 5});
  {
    AutocastGuard guard(d);
    // add promotes to f32, softmax/cross_entropy run in f32.
    cross_entropy(softmax(add(x, r)), t).backward();
  }
  cross_entropy(softmax(add(x2.to(f32), r2)), t).backward();
  EXPECT_EQ(x.grad().dtype(), d);
  EXPECT_TRUE(same_bits(x.grad(), x2.grad()));
  EXPECT_TRUE(same_bits(r.grad(), r2.grad()));
}

// A model written once runs under autocast unchanged: f32 weights, bf16 matmuls, f32 norms
// and residuals; every weight gets an f32 gradient close to the f32 run's.
TEST(AutocastOps, GptBlockForwardAndBackwardUnderBf16) {
  models::GptBlockConfig config;
  config.d_model = 64;
  models::GptBlock amp_block = models::GptBlock::init(config, 60);
  models::GptBlock ref_block = models::GptBlock::init(config, 60);
  for (Tensor* p : amp_block.parameters()) p->set_requires_grad();
  for (Tensor* p : ref_block.parameters()) p->set_requires_grad();
  const Tensor x = randn({2, 16, 64}, f32, 61);
  Tensor y;
  {
    AutocastGuard guard(DType::bf16);
    y = amp_block.forward(x);
    EXPECT_EQ(y.dtype(), f32);  // the residual add promotes bf16 branches to f32
    sum(mul(y, y)).backward();
    EXPECT_GT(autocast_stats().casts, 0);
  }
  const Tensor y_ref = ref_block.forward(x);
  sum(mul(y_ref, y_ref)).backward();
  EXPECT_FALSE(same_bits(y, y_ref));  // autocast really ran in bf16
  testing::expect_close(y, y_ref, 0.05, 0.02, "block output");
  const auto amp_params = amp_block.parameters(), ref_params = ref_block.parameters();
  for (size_t i = 0; i < amp_params.size(); ++i) {
    const Tensor g = amp_params[i]->grad(), g_ref = ref_params[i]->grad();
    ASSERT_TRUE(g.defined()) << "parameter " << i;
    EXPECT_EQ(g.dtype(), f32) << "parameter " << i;
    // Relative error of the whole gradient: bf16 operands give ~1e-2.
    const double err = norm(sub(g, g_ref)).item(), scale = norm(g_ref).item();
    EXPECT_LE(err, 0.05 * scale + 1e-6) << "parameter " << i;
  }
}

}  // namespace
}  // namespace mixprec::amp
