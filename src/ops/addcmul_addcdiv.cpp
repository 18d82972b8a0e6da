// addcmul / addcdiv as add(input, mul-or-div(scale(t1, value), t2)) on operands widened to
// f32 (f64 for f64): PyTorch's order of operations, one rounding into the result's dtype.
#include <string>

#include "mixprec/amp/autocast.h"
#include "mixprec/ops/elementwise.h"

namespace mixprec {
namespace {

Tensor add_product(const char* op, bool divide, const Tensor& input, const Tensor& t1,
                   const Tensor& t2, double value) {
  for (const Tensor* t : {&input, &t1, &t2}) {
    MIXPREC_CHECK(t->defined(), op, "undefined input");
    MIXPREC_CHECK(!t->is_meta(), op, "meta tensors have no data");
  }
  MIXPREC_CHECK(!divide || is_floating(t1.dtype()) || is_floating(t2.dtype()), op,
                "integer division is not supported (t1 and t2 are both integer; cast one to a "
                "floating dtype)");
  const DType dt = promote(promote(input.dtype(), t1.dtype()), t2.dtype());
  MIXPREC_CHECK(is_computable(dt), op,
                std::string("needs a floating input (f64, f32, bf16 or f16), the inputs promote "
                            "to ") +
                    dtype_name(dt) + (divide ? " (integer division is not supported)" : ""));
  const DType acc = dt == DType::f64 ? DType::f64 : DType::f32;
  const amp::AutocastGuard inner(DType::bf16, /*enabled=*/false);  // cast as the op's row says
  const Tensor scaled = scale(t1.to(acc), value);
  const Tensor term = divide ? div(scaled, t2.to(acc)) : mul(scaled, t2.to(acc));
  return add(input.to(acc), term).to(dt);
}

}  // namespace

Tensor addcmul(const Tensor& input_in, const Tensor& t1_in, const Tensor& t2_in, double value) {
  const auto [input, t1, t2] = amp::autocast_args("addcmul", input_in, t1_in, t2_in);
  return add_product("addcmul", false, input, t1, t2, value);
}

Tensor addcdiv(const Tensor& input_in, const Tensor& t1_in, const Tensor& t2_in, double value) {
  const auto [input, t1, t2] = amp::autocast_args("addcdiv", input_in, t1_in, t2_in);
  return add_product("addcdiv", true, input, t1, t2, value);
}

}  // namespace mixprec
