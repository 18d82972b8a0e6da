// The bf16 weights export: hand-computed roundings and the layout other tools read, then an
// independent reader: PyTorch parses the file with json/struct/torch.frombuffer and compares
// each tensor with its own f32 -> bf16 rounding (skipped when torch is not installed).
#include "mixprec/io/checkpoint_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "mixprec/amp/policy.h"
#include "mixprec/core/error.h"
#include "mixprec/io/safetensors.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using mixprec::testing::error_of;

class Bf16Export : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  mixprec::testing::TempDir tmp_;  // removed with everything in it after each test
  fs::path dir_ = tmp_.path();
};

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// f32 masters whose bf16 roundings were worked out by hand: {f32 bits, bf16 bits}.
struct Case {
  uint32_t f32, bf16;
};
constexpr Case kCases[] = {
    {0x3F800000, 0x3F80},  // 1
    {0x3F808000, 0x3F80},  // 1 + 2^-8: a tie, to even (down)
    {0x3F818000, 0x3F82},  // 1 + 3 * 2^-8: a tie, to even (up)
    {0x3F808001, 0x3F81},  // just above the tie: up
    {0xBF80FFFF, 0xBF81},  // -(1 + 255 * 2^-16 ...): nearest is up in magnitude
    {0x00010000, 0x0001},  // a subnormal, exact
    {0x80000000, 0x8000},  // -0
    {0x7F7F8000, 0x7F80},  // the overflow tie: to +inf
    {0x7F7F7FFF, 0x7F7F},  // just below it: bf16's max finite
};

optim::ParamList masters_with_cases() {
  const amp::MixedPrecisionPolicy policy = amp::preset("bf16-mixed");
  std::vector<float> values;
  for (const Case& c : kCases) values.push_back(from_bits(c.f32));
  return {std::make_shared<optim::Parameter>("blocks.0.attn.wq",
                                             Tensor::from_vector(values, {3, 3}), policy),
          std::make_shared<optim::Parameter>("blocks.0.norm.g",
                                             mixprec::testing::randn({16}, DType::f32, 3), policy),
          std::make_shared<optim::Parameter>(
              "lm_head.w", mixprec::testing::randn({4, 2, 5}, DType::f32, 4, 1e-3), policy)};
}

TEST_F(Bf16Export, RoundsEveryMasterOnceToBf16UnderItsName) {
  const optim::ParamList params = masters_with_cases();
  export_bf16_weights(file("w.safetensors"), params);
  const SafetensorsFile f = load_safetensors(file("w.safetensors"));
  EXPECT_EQ(f.metadata, (Metadata{{"format", "pt"}}));
  ASSERT_EQ(f.tensors.size(), params.size());
  for (const auto& p : params) {
    SCOPED_TRACE(p->name());
    EXPECT_EQ(f.at(p->name()).dtype(), DType::bf16);
    EXPECT_EQ(f.at(p->name()).shape(), p->master().shape());
  }
  const Tensor wq = f.at("blocks.0.attn.wq");
  for (std::size_t i = 0; i < std::size(kCases); ++i)
    EXPECT_EQ(static_cast<const uint16_t*>(wq.raw_data())[i], kCases[i].bf16)
        << "case " << i << std::hex << " f32 0x" << kCases[i].f32;
  // The header spells the dtype as safetensors does.
  std::ifstream in(file("w.safetensors"), std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  std::string header(len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(len));
  EXPECT_NE(header.find(R"("lm_head.w":{"data_offsets")"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("dtype":"BF16","shape":[4,2,5])"), std::string::npos) << header;

  const optim::ParamList twice{params[0], params[0]};
  EXPECT_NE(error_of([&] {
              export_bf16_weights(file("twice.safetensors"), twice);
            }).find("'blocks.0.attn.wq' appears twice"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(file("twice.safetensors")));
}

bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

TEST_F(Bf16Export, PyTorchLoadsItAndAgreesWithItsOwnRounding) {
  if (!torch_available()) GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  const fs::path script = fs::path(__FILE__).parent_path() / "torch_check_bf16_export.py";
  if (!fs::exists(script)) GTEST_SKIP() << "checker script not found at " << script;
  const optim::ParamList params = masters_with_cases();
  export_bf16_weights(file("w.safetensors"), params);
  // The f32 masters, for PyTorch to round itself.
  TensorList masters;
  for (const auto& p : params) masters.emplace_back(p->name(), p->master());
  save_safetensors(file("ref.safetensors"), masters);

  const std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + file("w.safetensors") +
                          "' '" + file("ref.safetensors") + "' 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  const int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "OK " + std::to_string(params.size()) + "\n");
}

}  // namespace
}  // namespace mixprec::io
