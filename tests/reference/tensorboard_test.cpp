// [metrics] enable_tensorboard: a short MoE training run's event files, read back by readers
// mixprec did not write (TensorBoard's EventAccumulator where the tensorboard package imports,
// and Google's protobuf runtime parsing TensorFlow's Event message), hold every scalar of
// metrics.jsonl at every step, with the same values (to f32, TensorBoard's simple_value).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "cli/cli_running.h"
#include "support/temp_files.h"
#include "support/torch_script.h"

namespace mixprec {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Scalars = std::map<std::pair<std::string, int64_t>, double>;  // (tag, step) -> value

// metrics.jsonl as TensorBoard tags: train/<key>, eval/<key>, train/expert_load/<b>/<e>.
Scalars from_jsonl(const fs::path& path) {
  Scalars out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    const std::string type = j.value("type", "");
    if (type != "train" && type != "eval") continue;
    const int64_t step = j["step"].get<int64_t>();
    for (const auto& [key, value] : j.items()) {
      if (key == "type" || key == "step" || key == "numerics") continue;
      if (key == "expert_load") {
        for (std::size_t b = 0; b < value.size(); ++b)
          for (std::size_t e = 0; e < value[b].size(); ++e)
            out[{"train/expert_load/" + std::to_string(b) + "/" + std::to_string(e), step}] =
                value[b][e].get<double>();
        continue;
      }
      out[{type + "/" + key, step}] =
          value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : value.get<double>();
    }
  }
  return out;
}

std::string python_with(const std::string& module) {
  for (const std::string& p : {std::string("/work/venv-peers/bin/python"), testing::python()})
    if ((p.front() != '/' || fs::exists(p)) &&
        std::system((p + " -c 'import " + module + "' >/dev/null 2>&1").c_str()) == 0)
      return p;
  return "";
}

TEST(Tensorboard, EventFilesHoldMetricsJsonlScalarsForIndependentReaders) {
  std::string python = python_with("tensorboard");
  if (python.empty()) python = python_with("google.protobuf");
  if (python.empty()) GTEST_SKIP() << "no Python with tensorboard or google.protobuf";
  testing::TempDir dir;
  const std::vector<std::string> args = {
      "train",      std::string(MIXPREC_SOURCE_DIR) + "/configs/tiny.toml",
      "--steps",    "12",
      "--run-dir",  (dir / "run").string(),
      "--progress", "quiet",
      "--set",      "metrics.enable_tensorboard=true",
      "--set",      "training.eval_every=6"};
  const testing::RunResult r = testing::run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << testing::describe(args, r);
  const Scalars want = from_jsonl(dir / "run" / "metrics.jsonl");
  ASSERT_GT(want.size(), 12u * 20);

  const fs::path log = dir / "scalars.jsonl";
  const std::string cmd = python + " " +
                          testing::shell_quoted(testing::reference_script("read_tensorboard.py")) +
                          " " + testing::shell_quoted((dir / "run" / "tb").string()) + " >" +
                          testing::shell_quoted(log.string()) + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::map<std::string, Scalars> by_reader;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    by_reader[j["reader"]][{j["tag"], j["step"].get<int64_t>()}] = j["value"].get<double>();
  }
  ASSERT_TRUE(by_reader.count("protobuf"));
  for (const auto& [reader, got] : by_reader) {
    SCOPED_TRACE(reader);
    EXPECT_EQ(got.size(), want.size());
    int wrong = 0;
    for (const auto& [key, value] : want) {
      const auto it = got.find(key);
      // expert loads are rounded to 4 decimals in metrics.jsonl, the rest is the same value.
      const double tol = key.first.find("expert_load") != std::string::npos
                             ? 6e-5
                             : 1e-7 * std::fabs(value) + 1e-30;
      const bool ok =
          it != got.end() &&
          (std::isnan(value) ? std::isnan(it->second)
                             : std::fabs(it->second - static_cast<float>(value)) <= tol);
      if (!ok && ++wrong <= 5)
        ADD_FAILURE() << key.first << " at step " << key.second << ": jsonl " << value << ", "
                      << (it == got.end() ? std::string("missing") : std::to_string(it->second));
    }
    EXPECT_EQ(wrong, 0);
  }
}

}  // namespace
}  // namespace mixprec
