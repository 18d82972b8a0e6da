// JSONL lines of the metrics file.
#include "mixprec/train/step_metrics.h"

#include <limits>

#include <cmath>
#include <nlohmann/json.hpp>

namespace mixprec::train {
namespace {

// JSON has no inf/NaN: a non-finite number is written as null.
nlohmann::json number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nullptr;
}

// One line; bytes that are not UTF-8 (a path can hold them) become U+FFFD instead of throwing.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

double StepMetrics::term(std::string_view name) const {
  for (const auto& [n, v] : terms)
    if (n == name) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

std::string to_json_line(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["type"] = "train";
  j["step"] = m.step;
  j["loss"] = number(m.loss);
  j["ce"] = number(m.ce);
  for (const auto& [name, value] : m.terms) j[name] = number(value);
  j["lr"] = m.lr;
  j["grad_norm"] = number(m.grad_norm);
  j["loss_scale"] = m.loss_scale;
  j["skipped"] = m.skipped;
  j["skipped_total"] = m.skipped_total;
  j["tokens"] = m.tokens;
  j["tokens_per_s"] = m.tokens_per_s;
  j["step_ms"] = m.step_ms;
  j["elapsed_s"] = m.elapsed_s;
  j["memory_bytes"] = m.memory_bytes;
  j["peak_bytes"] = m.peak_bytes;
  j["reserved_bytes"] = m.reserved_bytes;
  j["rss_bytes"] = m.rss_bytes;
  j["comm_bytes"] = m.comm_bytes;
  j["underflow_fraction"] = m.underflow_fraction;
  j["overflow_fraction"] = m.overflow_fraction;
  if (!std::isnan(m.fp8_saturated_fraction)) {
    j["fp8_saturated_fraction"] = m.fp8_saturated_fraction;
    j["fp8_flushed_fraction"] = m.fp8_flushed_fraction;
  }
  if (!m.expert_load.empty()) {
    nlohmann::ordered_json blocks = nlohmann::ordered_json::array();
    for (const auto& block : m.expert_load) {
      nlohmann::ordered_json loads = nlohmann::ordered_json::array();
      for (double load : block) loads.push_back(std::round(load * 1e4) / 1e4);  // 4 decimals
      blocks.push_back(std::move(loads));
    }
    j["expert_load"] = std::move(blocks);
  }
  std::string line = dump(j);
  if (!m.numerics_json.empty()) {  // already JSON: spliced in, not parsed again
    line.pop_back();
    line += ",\"numerics\":" + m.numerics_json + "}";
  }
  return line;
}

std::string to_json_line(const EvalMetrics& m) {
  nlohmann::ordered_json j;
  j["type"] = "eval";
  j["step"] = m.step;
  j["val_loss"] = number(m.val_loss);
  j["val_ppl"] = number(m.val_ppl);
  j["val_tokens"] = m.val_tokens;
  if (m.val_loss_per_byte > 0) j["val_loss_per_byte"] = number(m.val_loss_per_byte);
  return dump(j);
}

std::string run_json_line(const std::string& name, const std::string& precision, int64_t params,
                          int64_t start_step, const std::string& config_toml,
                          const std::string& bf16_kernel_json) {
  nlohmann::ordered_json j;
  j["type"] = "run";
  j["name"] = name;
  j["precision"] = precision;
  j["params"] = params;
  j["start_step"] = start_step;
  if (!bf16_kernel_json.empty()) j["bf16_kernel"] = nlohmann::ordered_json::parse(bf16_kernel_json);
  j["config"] = config_toml;
  return dump(j);
}

}  // namespace mixprec::train
