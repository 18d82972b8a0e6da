// Precision policies: the presets field by field (hand-written), every spelling parse_policy
// accepts, errors that name the bad token, to_string round trips, and the matmul precision
// setting and guard.
#include "mixprec/amp/policy.h"

#include <gtest/gtest.h>

#include <string>

#include "mixprec/core/error.h"
#include "support/op_testing.h"

namespace mixprec::amp {
namespace {

using mixprec::testing::error_of;

MixedPrecisionPolicy dtypes(DType param, DType compute, DType reduce, DType output) {
  MixedPrecisionPolicy p;
  p.param_dtype = param;
  p.compute_dtype = compute;
  p.reduce_dtype = reduce;
  p.output_dtype = output;
  return p;
}

TEST(Policy, PresetsFieldByField) {
  EXPECT_EQ(preset("fp32"), MixedPrecisionPolicy{});
  EXPECT_EQ(preset("fp32").master_dtype(), DType::f32);

  MixedPrecisionPolicy tf32;
  tf32.matmul_precision = MatmulPrecision::high;
  EXPECT_EQ(preset("tf32"), tf32);

  EXPECT_EQ(preset("bf16-mixed"), dtypes(DType::bf16, DType::bf16, DType::f32, DType::f32));
  EXPECT_EQ(preset("bf16-mixed").master_dtype(), DType::f32);

  MixedPrecisionPolicy fp16 = dtypes(DType::f16, DType::f16, DType::f32, DType::f32);
  fp16.loss_scaling = true;
  EXPECT_EQ(preset("fp16-mixed"), fp16);

  MixedPrecisionPolicy pure = dtypes(DType::bf16, DType::bf16, DType::bf16, DType::bf16);
  pure.f32_master = false;
  pure.master_update = MasterUpdate::stochastic;
  EXPECT_EQ(preset("bf16-pure"), pure);
  EXPECT_EQ(preset("bf16-pure").master_dtype(), DType::bf16);
  pure.master_update = MasterUpdate::kahan;
  EXPECT_EQ(preset("bf16-pure-kahan"), pure);

  EXPECT_EQ(preset_names(), "fp32, tf32, bf16-mixed, fp16-mixed, bf16-pure, bf16-pure-kahan");
}

TEST(Policy, ToStringRoundTripsEveryPreset) {
  for (const char* name :
       {"fp32", "tf32", "bf16-mixed", "fp16-mixed", "bf16-pure", "bf16-pure-kahan"}) {
    const MixedPrecisionPolicy p = preset(name);
    EXPECT_EQ(parse_policy(to_string(p)), p) << name << ": " << to_string(p);
    EXPECT_EQ(parse_policy(name), p) << name;
    EXPECT_EQ(display_name(p), name);
  }
  MixedPrecisionPolicy unscaled = preset("fp16-mixed");
  unscaled.loss_scaling = false;  // no longer the preset: shown in full
  EXPECT_EQ(display_name(unscaled), to_string(unscaled));
  EXPECT_EQ(to_string(preset("bf16-pure")),
            "param=bf16,compute=bf16,reduce=bf16,output=bf16,master=bf16,update=stochastic,"
            "matmul=highest,loss_scaling=false");
}

TEST(Policy, KerasNamesAndCase) {
  EXPECT_EQ(parse_policy("mixed_bfloat16"), preset("bf16-mixed"));
  EXPECT_EQ(parse_policy("mixed_float16"), preset("fp16-mixed"));
  EXPECT_EQ(parse_policy("  BF16-Mixed "), preset("bf16-mixed"));
  EXPECT_EQ(preset("Mixed_Float16"), preset("fp16-mixed"));
}

TEST(Policy, JmpStrings) {
  // jmp.get_policy: params default to f32, compute follows params, output follows compute;
  // reduce and master (mixprec's keys) follow params (the wider of f32 and params).
  EXPECT_EQ(parse_policy("params=float32,compute=bfloat16,output=float32"),
            dtypes(DType::f32, DType::bf16, DType::f32, DType::f32));
  // f16 compute turns loss scaling on unless loss_scaling= says otherwise.
  auto scaled = [](MixedPrecisionPolicy p) {
    p.loss_scaling = true;
    return p;
  };
  EXPECT_EQ(parse_policy(" p = f32 , c=half,o= bfloat16 "),
            scaled(dtypes(DType::f32, DType::f16, DType::f32, DType::bf16)));
  EXPECT_EQ(parse_policy("c=f16,loss_scaling=off"),
            dtypes(DType::f32, DType::f16, DType::f32, DType::f16));
  EXPECT_EQ(parse_policy("c=bf16"), dtypes(DType::f32, DType::bf16, DType::f32, DType::bf16));
  EXPECT_EQ(parse_policy("p=bf16"), dtypes(DType::bf16, DType::bf16, DType::f32, DType::bf16));
  EXPECT_EQ(parse_policy("o=bf16"), dtypes(DType::f32, DType::f32, DType::f32, DType::bf16));
  EXPECT_EQ(parse_policy("p=bf16,c=f32"), dtypes(DType::bf16, DType::f32, DType::f32, DType::f32));
  EXPECT_EQ(parse_policy("p=bf16,c=bf16,r=bf16"),
            dtypes(DType::bf16, DType::bf16, DType::bf16, DType::bf16));
  EXPECT_EQ(parse_policy("params=fp16,compute=fp16,reduce=float32,output=float16"),
            scaled(dtypes(DType::f16, DType::f16, DType::f32, DType::f16)));
  MixedPrecisionPolicy f64 = dtypes(DType::f64, DType::f64, DType::f64, DType::f64);
  f64.f32_master = false;  // master defaults to the wider of f32 and params
  EXPECT_EQ(parse_policy("params=double"), f64);

  MixedPrecisionPolicy extra = dtypes(DType::bf16, DType::bf16, DType::f32, DType::bf16);
  extra.f32_master = false;
  extra.master_update = MasterUpdate::kahan;
  extra.matmul_precision = MatmulPrecision::medium;
  extra.loss_scaling = true;
  EXPECT_EQ(parse_policy("p=bf16,c=bf16,master=bf16,update=Kahan,matmul=medium,loss_scaling=on"),
            extra);
  EXPECT_EQ(parse_policy(to_string(extra)), extra);
}

// jmp's dtype names: "full" is f32 and "half" f16 (jmp.half_dtype() off TPUs), in pairs and
// bare; a bare name applies to every part, as jmp's get_policy("half").
TEST(Policy, JmpFullAndHalf) {
  EXPECT_EQ(parse_policy("p=full,c=half"), [] {
    MixedPrecisionPolicy p = dtypes(DType::f32, DType::f16, DType::f32, DType::f16);
    p.loss_scaling = true;
    return p;
  }());
  EXPECT_EQ(parse_policy("params=FULL,compute=full"), preset("fp32"));
  EXPECT_EQ(parse_policy("full"), preset("fp32"));
  MixedPrecisionPolicy half = dtypes(DType::f16, DType::f16, DType::f16, DType::f16);
  half.loss_scaling = true;
  EXPECT_EQ(parse_policy("half"), half);
  EXPECT_NE(error_of([] { parse_policy("c=fulll"); }).find("full, half"), std::string::npos);
}

TEST(Policy, BareDtypeAppliesToAllWithF32Master) {
  const MixedPrecisionPolicy bf16 = parse_policy("bf16");
  EXPECT_EQ(bf16, dtypes(DType::bf16, DType::bf16, DType::bf16, DType::bf16));
  EXPECT_TRUE(bf16.f32_master);
  MixedPrecisionPolicy f16 = dtypes(DType::f16, DType::f16, DType::f16, DType::f16);
  f16.loss_scaling = true;  // f16 compute
  EXPECT_EQ(parse_policy("float16"), f16);
  EXPECT_EQ(parse_policy("f32"), preset("fp32"));
  MixedPrecisionPolicy f64 = dtypes(DType::f64, DType::f64, DType::f64, DType::f64);
  f64.f32_master = false;
  EXPECT_EQ(parse_policy("fp64"), f64);
  EXPECT_EQ(parse_policy("fp64").master_dtype(), DType::f64);
}

TEST(Policy, ErrorsNameTheBadTokenAndListWhatIsValid) {
  std::string m = error_of([] { parse_policy("bf17-mixed"); });
  EXPECT_NE(m.find("'bf17-mixed'"), std::string::npos) << m;
  EXPECT_NE(m.find("bf16-pure-kahan"), std::string::npos) << m;
  EXPECT_NE(m.find("mixed_bfloat16"), std::string::npos) << m;

  m = error_of([] { parse_policy("params=f32,compute_dtype=bf16"); });
  EXPECT_NE(m.find("'compute_dtype'"), std::string::npos) << m;
  EXPECT_NE(m.find("compute (c)"), std::string::npos) << m;

  m = error_of([] { parse_policy("p=f32,c=bfloat17"); });
  EXPECT_NE(m.find("'bfloat17'"), std::string::npos) << m;
  EXPECT_NE(m.find("bf16"), std::string::npos) << m;

  m = error_of([] { parse_policy("c=int32"); });
  EXPECT_NE(m.find("not a policy dtype"), std::string::npos) << m;
  m = error_of([] { parse_policy("c=e4m3"); });
  EXPECT_NE(m.find("'e4m3'"), std::string::npos) << m;

  m = error_of([] { parse_policy("p=bf16,params=f16"); });
  EXPECT_NE(m.find("'params' is given twice"), std::string::npos) << m;
  m = error_of([] { parse_policy("p=bf16,compute"); });
  EXPECT_NE(m.find("'compute'"), std::string::npos) << m;
  m = error_of([] { parse_policy("p=bf16,c="); });
  EXPECT_NE(m.find("'c' has no value"), std::string::npos) << m;
  m = error_of([] { parse_policy("p=bf16,master=f16"); });
  EXPECT_NE(m.find("master f16"), std::string::npos) << m;
  m = error_of([] { parse_policy("matmul=fastest"); });
  EXPECT_NE(m.find("'fastest'"), std::string::npos) << m;
  EXPECT_NE(m.find("highest, high, medium"), std::string::npos) << m;
  m = error_of([] { parse_policy("loss_scaling=maybe"); });
  EXPECT_NE(m.find("'maybe'"), std::string::npos) << m;
  EXPECT_NE(error_of([] { parse_policy("   "); }), "");
  m = error_of([] { preset("mixed"); });
  EXPECT_NE(m.find("'mixed'"), std::string::npos) << m;
  EXPECT_NE(m.find("fp16-mixed"), std::string::npos) << m;
}

TEST(MatmulPrecision, NamesRoundTrip) {
  for (MatmulPrecision p :
       {MatmulPrecision::highest, MatmulPrecision::high, MatmulPrecision::medium})
    EXPECT_EQ(parse_matmul_precision(matmul_precision_name(p)), p);
  EXPECT_EQ(parse_matmul_precision(" HIGH "), MatmulPrecision::high);
  EXPECT_STREQ(matmul_precision_name(MatmulPrecision::medium), "medium");
  EXPECT_THROW(parse_matmul_precision("tf32"), Error);
}

TEST(MatmulPrecision, GuardSetsAndRestoresNested) {
  EXPECT_EQ(matmul_precision(), MatmulPrecision::highest);  // the default
  {
    MatmulPrecisionGuard high(MatmulPrecision::high);
    EXPECT_EQ(matmul_precision(), MatmulPrecision::high);
    {
      MatmulPrecisionGuard medium(MatmulPrecision::medium);
      EXPECT_EQ(matmul_precision(), MatmulPrecision::medium);
    }
    EXPECT_EQ(matmul_precision(), MatmulPrecision::high);
  }
  EXPECT_EQ(matmul_precision(), MatmulPrecision::highest);
  set_matmul_precision(MatmulPrecision::medium);
  EXPECT_EQ(matmul_precision(), MatmulPrecision::medium);
  set_matmul_precision(MatmulPrecision::highest);
}

}  // namespace
}  // namespace mixprec::amp
