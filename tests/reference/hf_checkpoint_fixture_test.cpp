// Checkpoints written by Hugging Face transformers itself (tests/reference/
// make_hf_checkpoint_fixtures.py: tiny random LlamaForCausalLM with Llama 3 RoPE scaling,
// Qwen3ForCausalLM, GPT2LMHeadModel with gelu_new, DeepSeek-V3 MoE, saved by save_pretrained
// in transformers 5's format): each imports into the model its mixprec.toml describes, with
// logits within 1e-5 of transformers' (f32) and the same greedy continuation; mixprec's export
// holds the same tensors bit for bit and, where a Python with transformers is found, loads in
// transformers with the same logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "mixprec/amp/policy.h"
#include "mixprec/autograd/grad_mode.h"
#include "mixprec/io/checkpoint_state.h"
#include "mixprec/io/config_file.h"
#include "mixprec/io/hf_folder.h"
#include "mixprec/io/hf_weights.h"
#include "mixprec/io/safetensors.h"
#include "mixprec/models/registry.h"
#include "mixprec/ops.h"
#include "support/temp_files.h"
#include "support/torch_script.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(MIXPREC_FIXTURE_DIR) / "hf_checkpoints";

struct Imported {
  config::TrainConfig config;
  std::unique_ptr<models::Model> model;
};

Imported import_fixture(const std::string& family) {
  const fs::path folder = kFixtures / family;
  Imported out{config::load_config((folder / "mixprec.toml").string()), nullptr};
  out.model = models::make_model(out.config.model);
  out.model->materialize(0, amp::preset("fp32"));
  io::restore_training_state(
      io::import_hf(folder.string(), out.config.model),
      {out.model->parameters().parameters(), nullptr, nullptr, out.model->buffers()});
  return out;
}

int64_t argmax_last(const Tensor& logits) {  // [1, T, V] -> the last position's argmax
  const std::vector<double> v = logits.to_doubles();
  const int64_t V = logits.size(2), T = logits.size(1);
  const auto first = v.begin() + (T - 1) * V;
  return std::max_element(first, first + V) - first;
}

// An interpreter with transformers: MIXPREC_TRANSFORMERS_PYTHON, else the peers' venv.
std::string transformers_python() {
  if (const char* p = std::getenv("MIXPREC_TRANSFORMERS_PYTHON"); p && *p) return p;
  for (const char* p : {"/work/venv-peers/bin/python"})
    if (fs::exists(p) &&
        std::system((std::string(p) + " -c 'import transformers' >/dev/null 2>&1").c_str()) == 0)
      return p;
  return "";
}

class HfCheckpointFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(HfCheckpointFixture, ImportsWithTransformersLogitsAndGreedyTokens) {
  const std::string family = GetParam();
  const io::SafetensorsFile expected =
      io::load_safetensors((kFixtures / family / "expected.safetensors").string());
  Imported m = import_fixture(family);
  NoGradGuard no_grad;
  const Tensor logits = m.model->forward(expected.at("input_ids"));
  const Tensor want = expected.at("logits");
  ASSERT_EQ(logits.shape(), want.shape());
  const std::vector<double> got_v = logits.to_doubles(), want_v = want.to_doubles();
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < got_v.size(); ++i) {
    worst = std::max(worst, std::fabs(got_v[i] - want_v[i]));
    largest = std::max(largest, std::fabs(want_v[i]));
  }
  EXPECT_LE(worst, 1e-5 * largest) << family << ": worst " << worst << " of " << largest;

  const Tensor greedy = expected.at("greedy");  // [1, 24]: 8 prompt tokens, 16 generated
  std::vector<int64_t> tokens(greedy.data<int64_t>(), greedy.data<int64_t>() + 8);
  while (static_cast<int64_t>(tokens.size()) < greedy.size(1)) {
    const Tensor ids = Tensor::from_vector(tokens, {1, static_cast<int64_t>(tokens.size())});
    tokens.push_back(argmax_last(m.model->forward(ids)));
  }
  EXPECT_EQ(tokens,
            std::vector<int64_t>(greedy.data<int64_t>(), greedy.data<int64_t>() + greedy.size(1)));
}

TEST_P(HfCheckpointFixture, ExportHoldsTransformersTensorsAndLoadsThere) {
  const std::string family = GetParam();
  Imported m = import_fixture(family);
  testing::TempDir tmp;
  const fs::path out = tmp / "export";
  io::export_hf(out.string(), m.config.model, m.model->parameters().parameters(), {},
                m.model->buffers());
  const io::HfCheckpoint ours = io::read_hf_folder(out.string());
  const io::HfCheckpoint theirs = io::read_hf_folder((kFixtures / family).string());
  ASSERT_EQ(ours.tensors.size(), theirs.tensors.size());
  for (const auto& [name, t] : theirs.tensors) {
    ASSERT_TRUE(ours.tensors.count(name)) << name;
    EXPECT_TRUE(ours.tensors.at(name).to(DType::f32).to_doubles() == t.to(DType::f32).to_doubles())
        << name;
  }
  const std::string python = transformers_python();
  if (python.empty()) GTEST_SKIP() << "no Python with transformers (MIXPREC_TRANSFORMERS_PYTHON)";
  const fs::path log = tmp / "load.json";
  const std::string cmd =
      python + " " + testing::shell_quoted(testing::reference_script("hf_checkpoint_load.py")) +
      " " + testing::shell_quoted(out.string()) + " " +
      testing::shell_quoted((kFixtures / family / "expected.safetensors").string()) + " >" +
      testing::shell_quoted(log.string()) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_EQ(rc, 0) << cmd << "\n" << text.str();
  std::string last;
  for (std::string line; std::getline(text, line);)
    if (!line.empty() && line[0] == '{') last = line;
  const nlohmann::json r = nlohmann::json::parse(last);
  EXPECT_LE(r["max_abs_diff"].get<double>(), 1e-5 * r["max_abs_logit"].get<double>()) << last;
  EXPECT_TRUE(r["greedy_equal"].get<bool>()) << last;
}

// transformers 5 writes RoPE under "rope_parameters": a config whose RoPE differs from the
// file's is refused naming the key, not imported as another model.
TEST(HfCheckpointFixtureRope, AConfigThatDisagreesWithRopeParametersIsRefused) {
  auto refused = [](const std::string& family, auto change, const std::string& part) {
    config::TrainConfig c = config::load_config((kFixtures / family / "mixprec.toml").string());
    change(c.model);
    try {
      io::import_hf((kFixtures / family).string(), c.model);
      ADD_FAILURE() << family << ": imported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(
      "llama", [](config::ModelConfig& m) { m.rope_theta = 10000.0; }, "rope_theta = 500000");
  refused(
      "llama", [](config::ModelConfig& m) { m.rope_scaling = {}; }, "rope_scaling");
  refused(
      "qwen3", [](config::ModelConfig& m) { m.rope_theta = 10000.0; }, "rope_theta = 1000000");
  refused(
      "deepseek_v3", [](config::ModelConfig& m) { m.rope_theta = 50000.0; }, "rope_theta = 10000");
}

INSTANTIATE_TEST_SUITE_P(Families, HfCheckpointFixture,
                         ::testing::Values("llama", "qwen3", "gpt2", "deepseek_v3"));

}  // namespace
}  // namespace mixprec
