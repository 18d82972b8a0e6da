// NVFP4 quantization (numerics/nvfp4.h) against torchao 0.18's nvfp4_quantize on the CPU
// (fixtures/fp4/torchao.safetensors, made by tests/reference/make_fp4_fixtures.py): block
// scales and packed elements bit for bit, with one and with two levels of scaling, and the
// dequantized values within half an E2M1 step of the input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fp4_fixture.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/encode.h"
#include "mixprec/numerics/nvfp4.h"

namespace mixprec {
namespace {

using testing::fixture_values;

void expect_as_torchao(const char* level, std::optional<float> per_tensor_scale) {
  SCOPED_TRACE(level);
  const std::vector<float> x = fixture_values<float>("torchao", "nvfp4.in");
  const std::string prefix = std::string("nvfp4.") + level;
  const std::vector<uint8_t> want_scale = fixture_values<uint8_t>("torchao", prefix + ".scale");
  const std::vector<uint8_t> want_data = fixture_values<uint8_t>("torchao", prefix + ".data");
  ASSERT_EQ(x.size(), 512u);
  std::vector<uint8_t> scale(x.size() / 16), data(x.size() / 2);
  nvfp4_quantize(x, per_tensor_scale, scale, data);
  for (std::size_t b = 0; b < scale.size(); ++b)
    EXPECT_EQ(+scale[b], +want_scale[b]) << "block " << b;
  for (std::size_t i = 0; i < data.size(); ++i)
    EXPECT_EQ(+data[i], +want_data[i])
        << "byte " << i << " (elements " << 2 * i << ", " << 2 * i + 1 << ")";
  // Dequantized, every element is within half a step of the E2M1 grid at its block's scale
  // (the largest step is 2, between 4 and 6), or the input saturated past 6.
  std::vector<float> back(x.size());
  nvfp4_dequantize(data, scale, per_tensor_scale, back);
  for (std::size_t i = 0; i < x.size(); ++i) {
    double s = decode_f64(kFormatE4M3FN, scale[i / 16]);
    if (per_tensor_scale) s *= *per_tensor_scale;
    EXPECT_LE(std::fabs(back[i] - x[i]), std::max(1.0 * s, std::fabs(x[i]) - 6 * s) * 1.0001) << i;
  }
}

TEST(Nvfp4, OneLevelMatchesTorchao) {
  expect_as_torchao("one_level", std::nullopt);
}

TEST(Nvfp4, TwoLevelsMatchTorchao) {
  const std::vector<float> x = fixture_values<float>("torchao", "nvfp4.in");
  float amax = 0;
  for (const float v : x) amax = std::max(amax, std::fabs(v));
  const float pts = nvfp4_per_tensor_scale(amax);
  EXPECT_EQ(pts, fixture_values<float>("torchao", "nvfp4.two_level.per_tensor_scale")[0]);
  expect_as_torchao("two_level", pts);
}

TEST(Nvfp4, SizesAreChecked) {
  std::vector<float> x(24);
  std::vector<uint8_t> scale(1), data(12);
  EXPECT_THROW(nvfp4_quantize(x, std::nullopt, scale, data), Error);
  x.resize(32);
  EXPECT_THROW(nvfp4_quantize(x, std::nullopt, scale, data), Error);  // 2 scales needed
}

}  // namespace
}  // namespace mixprec
