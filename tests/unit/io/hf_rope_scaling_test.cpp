// config.json's rope_scaling: a scaled Llama exports Hugging Face's object (Llama 3.1's keys),
// imports accept the spellings Hugging Face reads as the same scaling ("type" for
// "rope_type", null keys, yarn's defaults left out) and refuse a different one, naming
// model.rope_scaling.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixprec/io/hf_weights.h"
#include "support/hf_testing.h"
#include "support/op_testing.h"
#include "support/temp_files.h"

namespace mixprec::io {
namespace {

using namespace mixprec::testing;
namespace fs = std::filesystem;
using nlohmann::json;

config::ModelConfig llama31() {
  return hf_llama31_config(8192);  // Meta's
}

config::ModelConfig yarn() {
  config::ModelConfig c = hf_llama_config();
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 16;
  return c;
}

json config_of(const fs::path& dir) {
  std::ifstream in(dir / "config.json");
  return json::parse(in);
}

// The exported folder with config.json's rope_scaling replaced.
fs::path with_rope_scaling(const fs::path& from, const fs::path& to, const json& value) {
  fs::copy(from, to);
  json j = config_of(to);
  j["rope_scaling"] = value;
  std::ofstream(to / "config.json") << j.dump();
  return to;
}

TEST(HfRopeScaling, ALlama31ExportsHuggingFacesObject) {
  const config::ModelConfig c = llama31();
  TempDir tmp;
  export_hf((tmp / "hf").string(), c, hf_test_model(c, 3)->parameters().parameters());
  EXPECT_EQ(config_of(tmp / "hf")["rope_scaling"],
            json::parse(R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"));
  EXPECT_NO_THROW(import_hf((tmp / "hf").string(), c));
  // Unscaled: null, as before.
  export_hf((tmp / "plain").string(), hf_llama_config(),
            hf_test_model(hf_llama_config(), 3)->parameters().parameters());
  EXPECT_TRUE(config_of(tmp / "plain")["rope_scaling"].is_null());
}

TEST(HfRopeScaling, OtherSpellingsOfTheSameScalingImport) {
  TempDir tmp;
  const config::ModelConfig c = llama31(), y = yarn();
  export_hf((tmp / "l").string(), c, hf_test_model(c, 3)->parameters().parameters());
  export_hf((tmp / "y").string(), y, hf_test_model(y, 3)->parameters().parameters());
  // Meta's older spelling, integers for floats, a null key.
  EXPECT_NO_THROW(import_hf(
      with_rope_scaling(tmp / "l", tmp / "l2", json::parse(R"({"type": "llama3", "factor": 8,
                            "low_freq_factor": 1, "high_freq_factor": 4,
                            "original_max_position_embeddings": 8192, "attention_factor": null})"))
          .string(),
      c));
  // Yarn with HF's defaults left out (beta_fast 32, beta_slow 1, truncate), or given as 0.
  EXPECT_NO_THROW(import_hf(
      with_rope_scaling(tmp / "y", tmp / "y2", json::parse(R"({"rope_type": "yarn", "factor": 4.0,
                                        "original_max_position_embeddings": 16})"))
          .string(),
      y));
  EXPECT_NO_THROW(
      import_hf(with_rope_scaling(tmp / "y", tmp / "y3",
                                  json::parse(R"({"type": "yarn", "factor": 4.0, "beta_fast": 0,
                                        "original_max_position_embeddings": 16})"))
                    .string(),
                y));
  // "default" is no scaling.
  export_hf((tmp / "p").string(), hf_llama_config(),
            hf_test_model(hf_llama_config(), 3)->parameters().parameters());
  EXPECT_NO_THROW(import_hf(
      with_rope_scaling(tmp / "p", tmp / "p2", json::parse(R"({"rope_type": "default"})")).string(),
      hf_llama_config()));
}

TEST(HfRopeScaling, ADifferentScalingIsRefusedNamingTheKey) {
  TempDir tmp;
  const config::ModelConfig c = llama31();
  export_hf((tmp / "l").string(), c, hf_test_model(c, 3)->parameters().parameters());
  const fs::path bigger = with_rope_scaling(tmp / "l", tmp / "f32",
                                            json::parse(R"({"rope_type": "llama3", "factor": 32.0,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"));
  std::string e = error_of([&] { import_hf(bigger.string(), c); });
  EXPECT_NE(e.find("rope_scaling = "), std::string::npos) << e;
  EXPECT_NE(e.find("but model.rope_scaling = "), std::string::npos) << e;
  // An unscaled model refuses a Llama 3.1 folder, and the other way round.
  e = error_of([&] { import_hf((tmp / "l").string(), hf_llama_config()); });
  EXPECT_NE(e.find("model.rope_scaling = null"), std::string::npos) << e;
  const fs::path none = with_rope_scaling(tmp / "l", tmp / "none", nullptr);
  e = error_of([&] { import_hf(none.string(), c); });
  EXPECT_NE(e.find("lacks \"rope_scaling\""), std::string::npos) << e;
}

}  // namespace
}  // namespace mixprec::io
