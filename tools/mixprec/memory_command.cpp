// `mixprec memory`: the memory planner's table, per rank and unsharded side by side.
#include "memory_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "config_options.h"
#include "mixprec/amp/policy.h"
#include "mixprec/core/error.h"
#include "mixprec/dist/machine_fit.h"
#include "mixprec/dist/memory_fit.h"
#include "mixprec/dist/memory_plan.h"
#include "mixprec/io/config_file.h"
#include "mixprec/numerics/dtype.h"
#include "usage_error.h"
#include "value_parse.h"

namespace mixprec::cli {
namespace {

struct MemoryArgs {
  std::string config;
  std::string params;
  std::string world_size = "1";  // parsed exactly by whole_number_option
  std::string precision;
  std::string optimizer;
  std::vector<std::string> set;
  std::string fit;  // a memory size, or "machine"
};

// "24GiB", "25.7 GB", "512MiB", "2e10" (bytes), or "machine" (this machine's memory, or its
// cgroup's or ulimit's limit).
std::size_t parse_memory_size(const std::string& text) {
  if (text == "machine") return dist::machine_memory_bytes();
  static const std::pair<const char*, double> units[] = {{"TiB", 1099511627776.0},
                                                         {"GiB", 1073741824.0},
                                                         {"MiB", 1048576.0},
                                                         {"KiB", 1024.0},
                                                         {"TB", 1e12},
                                                         {"GB", 1e9},
                                                         {"MB", 1e6},
                                                         {"kB", 1e3},
                                                         {"T", 1e12},
                                                         {"G", 1e9},
                                                         {"M", 1e6},
                                                         {"B", 1.0}};
  std::string number = text;
  double unit = 1.0;
  for (const auto& [suffix, factor] : units)
    if (number.size() > std::strlen(suffix) && number.ends_with(suffix)) {
      number.resize(number.size() - std::strlen(suffix));
      unit = factor;
      break;
    }
  while (!number.empty() && number.back() == ' ') number.pop_back();
  char* end = nullptr;
  const double v = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || !(v * unit >= 1) ||
      v * unit > 1e18)
    throw UsageError("--fit '" + text +
                     "': expected a memory size such as 24GiB, 32GB, 512MiB, or 'machine'");
  return static_cast<std::size_t>(v * unit);
}

// Every way the config's step can be run in `memory`: the fitting ones first, the suggestion
// (fewest compromises) marked.
void print_fit(const config::TrainConfig& c, int world_size, std::size_t memory, int threads) {
  const std::vector<dist::FitOption> options = dist::fit_options(c, world_size, memory, threads);
  fmt::print("\nways to run it in {} per rank (predicted RSS between steps at most that):\n",
             format_decimal_bytes(memory));
  fmt::print("{:<11} {:<22} {:>13} {:>10} {:>10}  {}\n", "optimizer", "activation_checkpoint",
             "rows/forward", "peak", "RSS", "fits");
  for (const dist::FitOption& f : options)
    fmt::print("{:<11} {:<22} {:>13} {:>10} {:>10}  {}\n", f.optimizer, f.activation_checkpoint,
               f.local_batch_size, format_decimal_bytes(f.plan.peak), format_decimal_bytes(f.rss),
               !f.fits                    ? "no, over by " + format_decimal_bytes(f.rss - memory)
               : f.rss > memory / 20 * 19 ? "yes, within 5% (the planner's margin): tight"
                                          : "yes");
  const dist::FitOption& best = options.front();
  if (!best.fits) {
    fmt::print(
        "none fits: the smallest needs {} (a smaller model, batch or seq_len, a "
        "narrower precision policy, or more ranks)\n",
        format_decimal_bytes(
            std::min_element(options.begin(), options.end(), [](const auto& a, const auto& b) {
              return a.rss < b.rss;
            })->rss));
    return;
  }
  fmt::print(
      "suggested: --set optimizer.name={} --set activation_checkpoint.mode={} --set "
      "training.local_batch_size={}\n",
      best.optimizer, best.activation_checkpoint, best.local_batch_size);
}

// A three-significant-digit number with a decimal unit from `units` (steps of 1000).
std::string scaled(double v, const char* const* units, int n_units, const char* sep) {
  int i = 0;
  while (i + 1 < n_units && std::fabs(v) >= 999.5) {
    v /= 1000.0;
    ++i;
  }
  if (i == 0) return fmt::format("{:.0f}{}{}", v, sep, units[0]);
  const int decimals = v < 9.995 ? 2 : v < 99.95 ? 1 : 0;
  return fmt::format("{:.{}f}{}{}", v, decimals, sep, units[i]);
}

amp::MixedPrecisionPolicy policy_or_usage_error(const std::string& text) {
  try {
    return amp::parse_policy(text);
  } catch (const Error& e) {
    throw UsageError(std::string("--precision: ") + e.what());
  }
}

std::string exact(std::size_t bytes) {
  std::string digits = std::to_string(bytes), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string column(std::size_t bytes) {
  return fmt::format("{:>10} {:>21}", format_decimal_bytes(bytes), exact(bytes) + " B");
}

void print_table(const dist::MemoryPlan& rank, const dist::MemoryPlan& whole,
                 const amp::MixedPrecisionPolicy& p, const std::string& optimizer) {
  const std::string w = fmt::format("per rank (W={})", rank.world_size);
  fmt::print("{:<24}{:>32}   {:>32}\n", "term", w, "unsharded (W=1)");
  auto row = [&](const std::string& name, std::size_t a, std::size_t b) {
    fmt::print("{:<24}{}   {}\n", name, column(a), column(b));
  };
  row(fmt::format("master ({})", dtype_name(p.master_dtype())), rank.master, whole.master);
  row(fmt::format("working ({})", dtype_name(p.param_dtype)), rank.working, whole.working);
  row(fmt::format("gradients ({})", dtype_name(p.reduce_dtype)), rank.grads, whole.grads);
  row(fmt::format("optimizer ({})", optimizer), rank.optimizer, whole.optimizer);
  if (rank.has_activations)
    row("activations", rank.activations, whole.activations);
  else
    fmt::print("{:<24}{:>32}   {:>32}\n", "activations", "n/a", "n/a");
  row("communication", rank.comm, whole.comm);
  row("total (sum of terms)", rank.sum(), whole.sum());
  if (rank.has_activations) row("predicted peak", rank.peak, whole.peak);
}

void print_weights_line(int64_t params, int world_size) {
  const auto total = static_cast<std::size_t>(params) * 4;
  const auto shard = static_cast<std::size_t>((params + world_size - 1) / world_size) * 4;
  fmt::print("{} parameters: FP32 weights {} total, {} per rank at W={}\n", format_count(params),
             format_decimal_bytes(total), format_decimal_bytes(shard), world_size);
}

void run_memory(const MemoryArgs& a) {
  if (a.config.empty() == a.params.empty())
    throw UsageError("memory: give exactly one of --config FILE or --params N");
  const int w = static_cast<int>(
      whole_number_option("--world-size", a.world_size, 1, dist::kMaxPlannedWorldSize, false,
                          "far beyond today's largest jobs of about 10^5 accelerators"));
  if (!a.optimizer.empty() && a.optimizer != "adamw" && a.optimizer != "sgd" &&
      a.optimizer != "adam-mini")
    throw UsageError("--optimizer '" + a.optimizer + "' is not one of adamw, sgd, adam-mini");

  if (!a.params.empty()) {
    if (!a.set.empty()) throw UsageError("--set needs --config");
    if (!a.fit.empty()) throw UsageError("--fit needs --config (the model's activations)");
    const int64_t n = parse_parameter_count(a.params);
    const amp::MixedPrecisionPolicy p =
        policy_or_usage_error(a.precision.empty() ? "bf16-mixed" : a.precision);
    const std::string opt = a.optimizer.empty() ? "adamw" : a.optimizer;
    fmt::print("mixprec memory: {} parameters, precision {}, optimizer {}, world size {}\n",
               format_count(n), amp::display_name(p), opt, w);
    print_table(dist::plan_memory_for_count(n, w, p, opt),
                dist::plan_memory_for_count(n, 1, p, opt), p, opt);
    fmt::print(
        "(no model shapes: activations unknown; the working copy per rank is its cast "
        "shard)\n");
    print_weights_line(n, w);
    return;
  }

  if (!a.precision.empty()) policy_or_usage_error(a.precision);  // names a bad preset first
  const std::size_t fit_bytes = a.fit.empty() ? 0 : parse_memory_size(a.fit);
  std::vector<std::string> sets = a.set;
  if (!a.optimizer.empty()) sets.push_back("optimizer.name=" + a.optimizer);
  const config::TrainConfig c = load_config_with(a.config, a.precision, sets);
  const dist::MemoryPlan rank = dist::plan_memory(c, w), whole = dist::plan_memory(c, 1);
  const int64_t per_rank = c.training.batch_size / w;
  fmt::print("mixprec memory: {} ({} model, {} parameters), precision {}, optimizer {}\n", a.config,
             c.model.kind, format_count(rank.parameters), amp::display_name(c.training.policy),
             c.optimizer.name);
  fmt::print(
      "world size {}: {} x {} tokens per rank (global batch {}), reshard after forward "
      "{}\n",
      w, per_rank, c.training.seq_len, c.training.batch_size,
      c.parallelism.reshard_after_forward ? "on" : "off");
  print_table(rank, whole, c.training.policy, c.optimizer.name);
  fmt::print(
      "(predicted peak: the largest live total over a step; gradients grow while "
      "backward frees activations)\n");
  // The trainer's threads: training.threads, or this machine's cores shared by W ranks.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads =
      c.training.threads > 0 ? static_cast<int>(c.training.threads) : std::max(1, cores / w);
  const std::size_t rss = dist::predict_rss(rank, threads, 0);
  fmt::print(
      "predicted RSS between steps: {} per rank ({:g} x the peak in allocator blocks, plus "
      "code, libraries and {} thread(s)' buffers; add the token file, memory-mapped)\n",
      format_decimal_bytes(rss),
      rank.routed ? dist::kRssAllocatorFactorMoe : dist::kRssAllocatorFactorDense, threads);
  print_weights_line(rank.parameters, w);
  if (!a.fit.empty()) print_fit(c, w, fit_bytes, threads);
}

}  // namespace

int64_t parse_parameter_count(const std::string& text) {
  // 1e15: 500 x today's largest models, and every byte total of the plan stays exact.
  return whole_number_option("--params", text, 1, dist::kMaxPlannedParameters, true,
                             "500 x today's largest models");
}

std::string format_decimal_bytes(std::size_t bytes) {
  static const char* const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
  return scaled(static_cast<double>(bytes), units, 7, " ");
}

std::string format_count(int64_t n) {
  static const char* const units[] = {"", "k", "M", "B", "T"};
  std::string s = scaled(static_cast<double>(n), units, 5, "");
  // "500.00B" reads better as "500B": drop trailing zeros of the fraction.
  const std::size_t dot = s.find('.');
  if (dot != std::string::npos) {
    std::size_t end = dot;
    while (end < s.size() && (std::isdigit(static_cast<unsigned char>(s[end])) || s[end] == '.'))
      ++end;
    std::size_t cut = end;
    while (cut > dot + 1 && s[cut - 1] == '0') --cut;
    if (cut == dot + 1) cut = dot;
    s.erase(cut, end - cut);
  }
  return s;
}

void add_memory_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MemoryArgs>();
  CLI::App* cmd = app.add_subcommand(
      "memory",
      "Bytes per rank of a training step: masters, working copy, gradients, optimizer "
      "state, activations, communication buffers");
  cmd->footer(
      "Examples:\n"
      "  mixprec memory --config configs/moe_small.toml --world-size 2\n"
      "  mixprec memory --params 500e9 --world-size 512\n"
      "  mixprec memory --params 7B --precision fp32 --optimizer sgd\n"
      "  mixprec memory --config configs/llama3_1b.toml --fit 24GiB\n"
      "Units are decimal (1 GB = 10^9 bytes), as memory sizes are usually quoted.");
  cmd->add_option("--config", args->config, "TOML config file (model, batch, precision, ...)");
  cmd->add_option("--params", args->params, "a parameter count instead: 500e9, 7B, 1.5M");
  cmd->add_option("--world-size", args->world_size, "ranks sharing the model (default 1)");
  cmd->add_option("--precision", args->precision,
                  "precision policy (a preset or key=value form; default: the config's, or "
                  "bf16-mixed)");
  cmd->add_option("--optimizer", args->optimizer,
                  "adamw | sgd | adam-mini (default: the config's)");
  cmd->add_option("--set", args->set, "override a config key: section.key=value (repeatable)");
  cmd->add_option("--fit", args->fit,
                  "list the optimizer / activation checkpointing / rows-per-forward "
                  "combinations that fit this much memory per rank (24GiB, 32GB, machine)");
  cmd->callback([args, &exit_code] {
    run_memory(*args);
    exit_code = 0;
  });
}

}  // namespace mixprec::cli
