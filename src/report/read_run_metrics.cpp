// metrics.jsonl -> RunMetrics: per-line JSON objects, forward compatible, resume-aware.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/regular_file.h"
#include "mixprec/report/run_metrics.h"

namespace mixprec::report {
namespace {

using nlohmann::json;
constexpr const char* kReadRunMetrics = "report::read_run_metrics";
// About 400 bytes a step: millions of steps, still a bound on what is read into memory.
constexpr uint64_t kMaxMetricsBytes = uint64_t{2} << 30;

// Where a value came from, for error messages: "<file>:<line>".
struct LineRef {
  const std::filesystem::path& source;
  std::size_t line;
  std::string at() const { return source.string() + ":" + std::to_string(line); }
};

[[noreturn]] void bad_key(const LineRef& ref, const char* key, const json& v,
                          const char* expected) {
  throw Error(kReadRunMetrics,
              ref.at() + ": key \"" + key + "\" is " + v.dump() + ", expected " + expected);
}

double number(const json& obj, const char* key, const LineRef& ref) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return NAN;
  if (!it->is_number()) bad_key(ref, key, *it, "a number or null");
  return it->get<double>();
}

int64_t integer(const json& obj, const char* key, const LineRef& ref, bool required = false) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required)
      throw Error(kReadRunMetrics, ref.at() + ": missing key \"" + std::string(key) + "\"");
    return 0;
  }
  if (it->is_number_integer()) return it->get<int64_t>();
  // Writers that keep every number a double (2048.0) still mean an integer.
  if (it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 0x1p62)
      return static_cast<int64_t>(d);
  }
  bad_key(ref, key, *it, "an integer");
}

bool boolean(const json& obj, const char* key, const LineRef& ref) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) bad_key(ref, key, *it, "true or false");
  return it->get<bool>();
}

std::string text(const json& obj, const char* key, const LineRef& ref) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_string()) bad_key(ref, key, *it, "a string");
  return it->get<std::string>();
}

TrainRecord train_record(const json& o, const LineRef& ref) {
  TrainRecord r;
  r.step = integer(o, "step", ref, /*required=*/true);
  r.loss = number(o, "loss", ref);
  r.ce = number(o, "ce", ref);
  r.aux = number(o, "aux", ref);
  r.z = number(o, "z", ref);
  r.lr = number(o, "lr", ref);
  r.grad_norm = number(o, "grad_norm", ref);
  r.loss_scale = number(o, "loss_scale", ref);
  r.skipped = boolean(o, "skipped", ref);
  r.skipped_total = integer(o, "skipped_total", ref);
  r.tokens = integer(o, "tokens", ref);
  r.tokens_per_s = number(o, "tokens_per_s", ref);
  r.step_ms = number(o, "step_ms", ref);
  r.elapsed_s = number(o, "elapsed_s", ref);
  r.memory_bytes = integer(o, "memory_bytes", ref);
  r.peak_bytes = integer(o, "peak_bytes", ref);
  r.underflow_fraction = number(o, "underflow_fraction", ref);
  r.overflow_fraction = number(o, "overflow_fraction", ref);
  r.fp8_saturated_fraction = number(o, "fp8_saturated_fraction", ref);
  r.fp8_flushed_fraction = number(o, "fp8_flushed_fraction", ref);
  if (const auto it = o.find("expert_load"); it != o.end() && !it->is_null()) {
    if (!it->is_array()) bad_key(ref, "expert_load", *it, "an array of arrays of numbers");
    for (const json& block : *it) {
      if (!block.is_array()) bad_key(ref, "expert_load", *it, "an array of arrays of numbers");
      for (const json& load : block) {
        if (!load.is_number()) bad_key(ref, "expert_load", *it, "an array of arrays of numbers");
        const double v = load.get<double>();
        r.expert_load_max = std::isnan(r.expert_load_max) ? v : std::max(r.expert_load_max, v);
        r.expert_load_min = std::isnan(r.expert_load_min) ? v : std::min(r.expert_load_min, v);
      }
    }
  }
  return r;
}

EvalRecord eval_record(const json& o, const LineRef& ref) {
  EvalRecord r;
  r.step = integer(o, "step", ref, /*required=*/true);
  r.val_loss = number(o, "val_loss", ref);
  r.val_ppl = number(o, "val_ppl", ref);
  r.val_tokens = integer(o, "val_tokens", ref);
  return r;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

// Records keyed by step, so a repeated step replaces the earlier one.
struct Timeline {
  std::map<int64_t, TrainRecord> train;
  std::map<int64_t, EvalRecord> eval;
  bool restarted = false;  // a "run" line came after records

  // The first record after a restart at `step`: what the old timeline logged from there on
  // is superseded. An eval at step s follows train step s, so a train record at s drops
  // evals at s too, while an eval at s keeps train step s.
  void restart_at(int64_t step, bool is_train) {
    if (!restarted) return;
    restarted = false;
    train.erase(train.lower_bound(is_train ? step : step + 1), train.end());
    eval.erase(eval.lower_bound(step), eval.end());
  }
};

}  // namespace

RunMetrics parse_run_metrics(std::string_view contents, const std::filesystem::path& source) {
  RunMetrics metrics;
  metrics.source = source;
  const std::vector<std::string> lines = split_lines(contents);
  std::size_t last = lines.size();
  while (last > 0 && blank(lines[last - 1])) --last;  // index + 1 of the last non-blank line

  Timeline timeline;
  for (std::size_t i = 0; i < last; ++i) {
    if (blank(lines[i])) continue;
    const LineRef ref{source, i + 1};
    const json o = json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (!o.is_object()) {
      if (i + 1 == last) {  // a killed run's half-written line
        metrics.skipped_truncated_line = true;
        break;
      }
      throw Error(kReadRunMetrics, ref.at() + ": not a JSON object: " + lines[i].substr(0, 80));
    }
    const auto type = o.find("type");
    if (type == o.end() || !type->is_string())
      throw Error(kReadRunMetrics, ref.at() + ": no \"type\" string in " + lines[i].substr(0, 80));
    const std::string& kind = type->get_ref<const std::string&>();
    if (kind == "run") {
      metrics.run = {text(o, "name", ref), text(o, "precision", ref), integer(o, "params", ref),
                     text(o, "config", ref)};
      ++metrics.starts;
      timeline.restarted = !timeline.train.empty() || !timeline.eval.empty();
    } else if (kind == "train") {
      TrainRecord r = train_record(o, ref);
      timeline.restart_at(r.step, /*is_train=*/true);
      timeline.train[r.step] = r;
    } else if (kind == "eval") {
      EvalRecord r = eval_record(o, ref);
      timeline.restart_at(r.step, /*is_train=*/false);
      timeline.eval[r.step] = r;
    }  // other types: written by a newer trainer, ignored
  }
  for (auto& [step, r] : timeline.train) metrics.train.push_back(r);
  for (auto& [step, r] : timeline.eval) metrics.eval.push_back(r);
  return metrics;
}

RunMetrics read_run_metrics(const std::filesystem::path& run_dir_or_jsonl) {
  std::error_code ec;  // a symlink loop: not a directory, and opening it names the loop
  const std::filesystem::path file = std::filesystem::is_directory(run_dir_or_jsonl, ec)
                                         ? run_dir_or_jsonl / "metrics.jsonl"
                                         : run_dir_or_jsonl;
  // A FIFO would block, a directory would read as no metrics at all: both are refused.
  return parse_run_metrics(
      io::read_regular_file(file, kMaxMetricsBytes, "metrics " + file.string()), file);
}

}  // namespace mixprec::report
