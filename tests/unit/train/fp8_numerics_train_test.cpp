// The numerics monitor's FP8 figures in training (amp/fp8_monitor.h): a run with a recipe logs
// them in metrics.jsonl (totals every step, per tensor on log steps; none for bf16-mixed), and
// a run whose linear input turns inf stops naming that FP8 tensor, with or without
// --detect-anomaly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/report/run_metrics.h"
#include "mixprec/train/trainer.h"
#include "train_testing.h"

namespace mixprec::train {
namespace {

using testing::quiet;
using testing::TempDir;
using testing::tiny_config;

// The tiny Llama 3 of fp8_train_test.cpp: every dim a multiple of 16.
config::TrainConfig llama(const TempDir& dir, const std::string& precision,
                          std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"model.kind=llama3",
                                "model.d_model=64",
                                "model.n_heads=4",
                                "model.n_kv_heads=4",
                                "model.d_ff=128",
                                "model.multiple_of=0",
                                "training.steps=4",
                                "training.eval_every=0",
                                "checkpoint.enable=false",
                                "metrics.log_every=2",
                                "training.precision=" + precision};
  o.insert(o.end(), extra.begin(), extra.end());
  return tiny_config(dir, o);
}

std::vector<nlohmann::json> train_lines(const TempDir& dir) {
  std::istringstream in(mixprec::testing::read_file(dir / "run" / "metrics.jsonl"));
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "train") out.push_back(std::move(j));
  }
  return out;
}

TEST(Fp8NumericsTraining, MetricsCarryTheFp8Figures) {
  TempDir dir;
  Trainer(llama(dir, "mxfp8"), quiet()).run();
  const std::vector<nlohmann::json> lines = train_lines(dir);
  ASSERT_EQ(lines.size(), 4u);
  const int64_t tokens = 4 * 32;  // training.batch_size x seq_len
  for (const nlohmann::json& j : lines) {
    const int step = j["step"].get<int>();
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_TRUE(j.contains("fp8_saturated_fraction")) << j.dump();
    // MX FLOOR scales saturate the top of a block by design (values past 464 of 512).
    EXPECT_GT(j["fp8_saturated_fraction"].get<double>(), 0.0);
    EXPECT_LT(j["fp8_saturated_fraction"].get<double>(), 0.01);
    EXPECT_GE(j["fp8_flushed_fraction"].get<double>(), 0.0);
    const nlohmann::json& n = j["numerics"];
    // 2 layers x (wq wk wv wo w_gate w_up w_down) x 6 operands; lm_head is filtered out.
    EXPECT_EQ(n["fp8_tensors"], 2 * 7 * 6);
    EXPECT_EQ(n["fp8_nonfinite"], 0);
    EXPECT_FALSE(n.contains("fp8_first_nonfinite"));
    EXPECT_EQ(n["fp8_saturated_fraction"], j["fp8_saturated_fraction"]);
    ASSERT_EQ(n.contains("fp8"), step % 2 == 0);  // per tensor on log steps
    if (step % 2 != 0) continue;
    const nlohmann::json& first = n["fp8"][0];
    EXPECT_EQ(first["name"], "blocks.0.attn.wq fwd.input");
    EXPECT_EQ(first["cast"], "f8_e4m3fn 1x32 mx_floor");
    EXPECT_EQ(first["numel"], tokens * 64);
    EXPECT_GT(first["amax"].get<double>(), 0.0);
    EXPECT_LE(first["scale_min"].get<double>(), first["scale_max"].get<double>());
  }
  // The plot's reader takes them.
  const report::RunMetrics m = report::read_run_metrics(dir / "run");
  EXPECT_EQ(m.train.back().fp8_saturated_fraction,
            lines.back()["fp8_saturated_fraction"].get<double>());

  // metrics.fp8_stats: on log steps only, or never.
  for (const char* when : {"log_steps", "off"}) {
    TempDir some;
    Trainer(llama(some, "mxfp8", {std::string("metrics.fp8_stats=") + when}), quiet()).run();
    for (const nlohmann::json& j : train_lines(some))
      EXPECT_EQ(j.contains("fp8_saturated_fraction"),
                std::string(when) == "log_steps" && j["step"].get<int>() % 2 == 0)
          << when << " " << j.dump();
  }
  // bf16-mixed writes no fp8 key.
  TempDir plain;
  Trainer(llama(plain, "bf16-mixed"), quiet()).run();
  for (const nlohmann::json& j : train_lines(plain))
    EXPECT_EQ(j.dump().find("fp8"), std::string::npos) << j.dump();
}

// An inf in the first attention norm's weight makes the input of the first layer's q, k and v
// projections inf: the stop rule names the first of them in execution order, wq's fwd.input.
TEST(Fp8NumericsTraining, AnInfInALinearsInputNamesThatFp8Tensor) {
  for (const bool anomaly : {false, true}) {
    SCOPED_TRACE(anomaly ? "--detect-anomaly" : "plain");
    TempDir dir;
    TrainerOptions options = quiet();
    options.detect_anomaly = anomaly;
    Trainer trainer(llama(dir, "tensorwise"), options);
    optim::Parameter& norm = trainer.model().parameters().at("blocks.0.attn_norm.weight");
    norm.master().data<float>()[3] = std::numeric_limits<float>::infinity();
    norm.refresh();
    std::string message;
    try {
      trainer.run();
    } catch (const Error& e) {
      message = e.what();
    }
    for (const char* part :
         {"diverged at step 1", "At step 1 FP8 tensor blocks.0.attn.wq fwd.input overflowed",
          "the first FP8 operand whose source held inf or NaN", "elements inf or NaN",
          "f8_e4m3fn allxall torchao"})
      EXPECT_NE(message.find(part), std::string::npos) << part << "\n" << message;
    if (anomaly) {
      std::printf("%s\n", message.c_str());  // what the user reads
      EXPECT_NE(message.find("Anomaly mode re-ran step 1"), std::string::npos) << message;
    }
    const std::vector<nlohmann::json> lines = train_lines(dir);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0]["numerics"]["fp8_first_nonfinite"], "blocks.0.attn.wq fwd.input");
  }
}

}  // namespace
}  // namespace mixprec::train
