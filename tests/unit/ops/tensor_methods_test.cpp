// Each Tensor method is its function (x.exp() is exp(x)): the same bits forward and backward,
// and the same autocast casts inside a region.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops.h"
#include "support/op_testing.h"

namespace mixprec {
namespace {

using namespace testing;  // mixprec::testing, the op-test support

struct Spelling {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> method, function;
};

std::vector<Spelling> spellings() {
  using T = const Tensor&;
  const Tensor cond = gt(randn({4, 6}, DType::f32, 9), 0.0);
  const Tensor rows = Tensor::from_vector<int64_t>({3, 0}, {2});
  return {
      {"exp", [](T x, T) { return x.exp(); }, [](T x, T) { return exp(x); }},
      {"log", [](T x, T) { return x.log(); }, [](T x, T) { return log(x); }},
      {"log1p", [](T x, T) { return x.log1p(); }, [](T x, T) { return log1p(x); }},
      {"expm1", [](T x, T) { return x.expm1(); }, [](T x, T) { return expm1(x); }},
      {"sqrt", [](T x, T) { return x.sqrt(); }, [](T x, T) { return sqrt(x); }},
      {"rsqrt", [](T x, T) { return x.rsqrt(); }, [](T x, T) { return rsqrt(x); }},
      {"reciprocal", [](T x, T) { return x.reciprocal(); }, [](T x, T) { return reciprocal(x); }},
      {"tanh", [](T x, T) { return x.tanh(); }, [](T x, T) { return tanh(x); }},
      {"pow", [](T x, T) { return x.pow(1.5); }, [](T x, T) { return pow(x, 1.5); }},
      {"pow tensor", [](T x, T y) { return x.pow(y); }, [](T x, T y) { return pow(x, y); }},
      {"sum", [](T x, T) { return x.sum(); }, [](T x, T) { return sum(x); }},
      {"sum dim", [](T x, T) { return x.sum(1, true); }, [](T x, T) { return sum(x, 1, true); }},
      {"mean", [](T x, T) { return x.mean(); }, [](T x, T) { return mean(x); }},
      {"mean dim", [](T x, T) { return x.mean(0); }, [](T x, T) { return mean(x, 0); }},
      {"prod", [](T x, T) { return x.prod(); }, [](T x, T) { return prod(x); }},
      {"prod dim", [](T x, T) { return x.prod(1); }, [](T x, T) { return prod(x, 1); }},
      {"cumsum", [](T x, T) { return x.cumsum(1); }, [](T x, T) { return cumsum(x, 1); }},
      {"logsumexp", [](T x, T) { return x.logsumexp(1); }, [](T x, T) { return logsumexp(x, 1); }},
      {"norm", [](T x, T) { return x.norm(); }, [](T x, T) { return norm(x); }},
      {"matmul", [](T x, T y) { return x.matmul(y.transpose(0, 1)); },
       [](T x, T y) { return matmul(x, y.transpose(0, 1)); }},
      {"mm", [](T x, T y) { return x.mm(y.transpose(0, 1).contiguous()); },
       [](T x, T y) { return mm(x, y.transpose(0, 1).contiguous()); }},
      {"bmm", [](T x, T y) { return x.unsqueeze(0).bmm(y.transpose(0, 1).unsqueeze(0)); },
       [](T x, T y) { return bmm(x.unsqueeze(0), y.transpose(0, 1).unsqueeze(0)); }},
      {"mv", [](T x, T y) { return x.mv(y.select(0, 0)); },
       [](T x, T y) { return mv(x, y.select(0, 0)); }},
      {"dot", [](T x, T y) { return x.select(0, 1).dot(y.select(0, 2)); },
       [](T x, T y) { return dot(x.select(0, 1), y.select(0, 2)); }},
      {"addmm", [](T x, T y) { return x.select(0, 0).slice(0, 0, 4).addmm(x, y.transpose(0, 1)); },
       [](T x, T y) { return addmm(x.select(0, 0).slice(0, 0, 4), x, y.transpose(0, 1)); }},
      {"baddbmm",
       [](T x, T y) {
         return x.select(0, 1).slice(0, 0, 4).baddbmm(x.unsqueeze(0),
                                                      y.transpose(0, 1).unsqueeze(0));
       },
       [](T x, T y) {
         return baddbmm(x.select(0, 1).slice(0, 0, 4), x.unsqueeze(0),
                        y.transpose(0, 1).unsqueeze(0));
       }},
      {"addcmul", [](T x, T y) { return x.addcmul(y, x, 0.5); },
       [](T x, T y) { return addcmul(x, y, x, 0.5); }},
      {"addcdiv", [](T x, T y) { return x.addcdiv(y, x, -2.0); },
       [](T x, T y) { return addcdiv(x, y, x, -2.0); }},
      {"where", [cond](T x, T y) { return x.where(cond, y); },
       [cond](T x, T y) { return where(cond, x, y); }},
      {"index_put", [rows](T x, T y) { return x.index_put({rows}, y.slice(0, 0, 2), true); },
       [rows](T x, T y) { return index_put(x, {rows}, y.slice(0, 0, 2), true); }},
  };
}

std::vector<Tensor> run(const std::function<Tensor(const Tensor&, const Tensor&)>& f, DType dt) {
  Tensor x = randn({4, 6}, DType::f32, 1), y = randn({4, 6}, DType::f32, 2);
  // Positive x (every pointwise function's domain), both in dt.
  x = Tensor::from_doubles(
      [&] {
        std::vector<double> v = x.to_doubles();
        for (double& e : v) e = std::fabs(e) + 0.5;
        return v;
      }(),
      {4, 6}, dt);
  y = y.to(dt);
  x.set_requires_grad(true);
  y.set_requires_grad(true);
  const Tensor out = f(x, y);
  sum(out).backward();
  return {out, x.grad(), y.grad().defined() ? y.grad() : Tensor::zeros({1})};
}

TEST(TensorMethods, EachMethodIsItsFunctionForwardAndBackward) {
  for (const Spelling& s : spellings())
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(s.name + " " + dtype_name(dt));
      const std::vector<Tensor> a = run(s.method, dt), b = run(s.function, dt);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], b[i])) << i;
    }
}

TEST(TensorMethods, MethodsGetTheirFunctionsAutocastRows) {
  const Tensor a = randn({4, 8}, DType::f32, 3), b = randn({8, 5}, DType::f32, 4);
  const Tensor h = randn({4, 8}, DType::bf16, 5);
  amp::AutocastGuard guard(DType::bf16);
  EXPECT_EQ(a.matmul(b).dtype(), DType::bf16);  // lower precision
  EXPECT_EQ(a.mm(b).dtype(), DType::bf16);
  EXPECT_EQ(h.exp().dtype(), DType::f32);  // fp32
  EXPECT_EQ(h.sum().dtype(), DType::f32);
  EXPECT_EQ(h.cumsum(1).dtype(), DType::f32);
  EXPECT_EQ(h.addcmul(a, h).dtype(), DType::f32);  // promote
}

}  // namespace
}  // namespace mixprec
