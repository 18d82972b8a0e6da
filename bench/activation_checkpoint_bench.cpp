// Activation checkpointing on whole `mixprec train` runs: peak memory and step time of each
// [activation_checkpoint] mode against mode = none, and the proof that the losses stay the same.
//
// Models: "gpt2s", the GPT-2-small shape (configs/gpt_small.toml widened to d_model 768,
// 12 layers, 12 heads, d_ff 3072, T 1024, batch 4; byte vocabulary), and "llama3_100m"
// (configs/llama3_100m.toml as it is: T 512, batch 8). Both 4096 tokens per step.
// Modes: none; selective "op" (attention and every other linear kept); selective "2" (every
// second block fully); full.
//
// Each run is its own process (so its resident set is its own), evaluation, checkpoints and the
// plot off. Rounds run the modes in turn (none, op, 2, full, none, ...) so drift hits all.
// Per mode:
//   step s     median step time over every round's steps after the first (warm-up)
//   peak       the allocator's largest live bytes in a step (metrics.jsonl peak_bytes)
//   over       peak minus the bytes live between steps (masters, optimizer state,
//              working copies): what the step's activations and gradients add
//   planned    the memory planner's predicted peak for that mode (`mixprec memory`)
//   max RSS    the process's resident high-water mark (the kernel's ru_maxrss)
// and the ratios of step time and "over" to mode none. Every mode's per-step loss and gradient
// norm are compared, as the bits metrics.jsonl holds (17 significant digits), with the first
// round's none run: a difference fails the benchmark (exit 1).
//
// Usage: bench_activation_checkpoint [--only=gpt2s|llama3_100m] [--steps=N] [--rounds=N]
//                                    [--precision=P] [--threads=N] [--keep]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "child_process.h"
#include "mixprec/config/train_config.h"
#include "mixprec/dist/memory_plan.h"
#include "mixprec/io/config_file.h"

namespace fs = std::filesystem;
using namespace mixprec;

namespace {

constexpr const char* kUsage =
    "bench_activation_checkpoint [--only=gpt2s|llama3_100m] [--steps=N] [--rounds=N] "
    "[--precision=P] [--threads=N] [--keep]";

struct Options {
  std::string only;  // "" = both models
  int steps = 4;
  int rounds = 1;
  std::string precision = "bf16-mixed";
  int threads = 2;
  bool keep = false;
};

struct ModelCase {
  const char* name;
  const char* config;  // relative to the source tree
  std::vector<std::string> overrides;
};

const std::vector<ModelCase>& model_cases() {
  static const std::vector<ModelCase> cases = {
      {"gpt2s",
       "configs/gpt_small.toml",
       {"model.d_model=768", "model.n_layers=12", "model.n_heads=12", "model.d_ff=3072",
        "model.max_seq_len=1024", "training.seq_len=1024", "training.batch_size=4"}},
      {"llama3_100m", "configs/llama3_100m.toml", {}},
  };
  return cases;
}

struct Mode {
  const char* label;
  std::vector<std::string> overrides;
};

const std::vector<Mode>& modes() {
  static const std::vector<Mode> list = {
      {"none", {"activation_checkpoint.mode=none"}},
      {"selective op",
       {"activation_checkpoint.mode=selective", "activation_checkpoint.selective_ac_option=op"}},
      {"selective 2",
       {"activation_checkpoint.mode=selective", "activation_checkpoint.selective_ac_option=2"}},
      {"full", {"activation_checkpoint.mode=full"}},
  };
  return list;
}

[[noreturn]] void usage_error(const std::string& what) {
  bench::usage_exit("bench_activation_checkpoint", kUsage, what);
}

int positive_int(const std::string& key, const std::string& v) {
  return bench::positive_int_option("bench_activation_checkpoint", kUsage, key, v);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) { return bench::option_value(a, key); };
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s\n", kUsage);
      std::exit(0);
    } else if (auto v = value("--only")) {
      if (*v != "gpt2s" && *v != "llama3_100m") usage_error("--only takes gpt2s or llama3_100m");
      o.only = *v;
    } else if (auto v = value("--steps")) {
      o.steps = positive_int("--steps", *v);
    } else if (auto v = value("--rounds")) {
      o.rounds = positive_int("--rounds", *v);
    } else if (auto v = value("--threads")) {
      o.threads = positive_int("--threads", *v);
    } else if (auto v = value("--precision")) {
      o.precision = *v;
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      usage_error("unknown option '" + a + "'");
    }
  }
  if (o.steps < 2) usage_error("--steps must be >= 2 (the first step is not timed)");
  return o;
}

// What one run's metrics.jsonl says, step by step.
struct RunSeries {
  std::vector<std::string> loss_bits, grad_norm_bits;  // the numbers as written: compared exactly
  std::vector<double> step_s;
  double peak_bytes = 0, over_bytes = 0, max_rss_bytes = 0;
};

RunSeries read_run(const fs::path& jsonl) {
  RunSeries r;
  std::ifstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || j.value("type", "") != "train") continue;
    r.loss_bits.push_back(j.at("loss").dump());
    r.grad_norm_bits.push_back(j.at("grad_norm").dump());
    r.step_s.push_back(j.at("step_ms").get<double>() / 1e3);
    const double peak = j.at("peak_bytes").get<double>();
    r.peak_bytes = std::max(r.peak_bytes, peak);
    r.over_bytes = std::max(r.over_bytes, peak - j.at("memory_bytes").get<double>());
  }
  return r;
}

struct Runner {
  Options opt;
  fs::path root;

  std::vector<std::string> overrides(const ModelCase& m, const Mode& mode) const {
    std::vector<std::string> o = m.overrides;
    o.insert(o.end(), mode.overrides.begin(), mode.overrides.end());
    for (const std::string& s :
         {"training.steps=" + std::to_string(opt.steps), std::string("training.eval_every=0"),
          std::string("checkpoint.enable=false"), std::string("metrics.plot=false"),
          std::string("metrics.log_every=1"), "training.threads=" + std::to_string(opt.threads)})
      o.push_back(s);
    return o;
  }

  // One `mixprec train` run; nullopt (after printing its log's tail) if it failed.
  std::optional<RunSeries> run(const ModelCase& m, const Mode& mode, const std::string& config,
                               int round) const {
    const fs::path dir =
        root / (std::string(m.name) + "-" + mode.label + "-" + std::to_string(round));
    std::vector<std::string> argv = {MIXPREC_CLI_PATH, "train",      config,
                                     "--run-dir",      dir.string(), "--precision",
                                     opt.precision,    "--progress", "quiet"};
    for (const std::string& s : overrides(m, mode)) {
      argv.push_back("--set");
      argv.push_back(s);
    }
    fs::create_directories(dir);
    const bench::ChildResult child =
        bench::run_child(argv, bench::environment_with({}), dir / "log.txt");
    RunSeries r = read_run(dir / "metrics.jsonl");
    r.max_rss_bytes = child.max_rss_bytes;
    if (child.status != 0 || static_cast<int>(r.step_s.size()) != opt.steps) {
      std::fprintf(stderr, "%s, %s: exit %d after %zu steps\n%s\n", m.name, mode.label,
                   child.status, r.step_s.size(), bench::file_tail(dir / "log.txt", 2000).c_str());
      return std::nullopt;
    }
    return r;
  }

  // The first step where `b` leaves `a`, or -1.
  static int first_difference(const RunSeries& a, const RunSeries& b) {
    for (std::size_t i = 0; i < a.loss_bits.size(); ++i)
      if (a.loss_bits[i] != b.loss_bits[i] || a.grad_norm_bits[i] != b.grad_norm_bits[i])
        return static_cast<int>(i) + 1;
    return -1;
  }

  bool table(const ModelCase& m) const {
    const std::string config = (fs::path(MIXPREC_SOURCE_DIR) / m.config).string();
    struct Row {
      std::vector<double> step_s;
      double peak = 0, over = 0, rss = 0, planned = 0;
    };
    std::vector<Row> rows(modes().size());
    for (std::size_t k = 0; k < modes().size(); ++k) {
      const config::TrainConfig c = config::load_config(config, overrides(m, modes()[k]));
      rows[k].planned = static_cast<double>(dist::plan_memory(c, 1).peak);
    }
    std::optional<RunSeries> reference;
    bool same_losses = true;
    for (int round = 0; round < opt.rounds; ++round)
      for (std::size_t k = 0; k < modes().size(); ++k) {
        const std::optional<RunSeries> r = run(m, modes()[k], config, round);
        if (!r) return false;
        if (!reference) reference = r;
        if (const int step = first_difference(*reference, *r); step > 0) {
          std::printf("%s, %s (round %d): loss or gradient norm differs from none at step %d\n",
                      m.name, modes()[k].label, round + 1, step);
          same_losses = false;
        }
        Row& row = rows[k];
        row.step_s.insert(row.step_s.end(), r->step_s.begin() + 1, r->step_s.end());
        row.peak = std::max(row.peak, r->peak_bytes);
        row.over = std::max(row.over, r->over_bytes);
        row.rss = std::max(row.rss, r->max_rss_bytes);
      }

    const config::TrainConfig base = config::load_config(config, m.overrides);
    std::printf(
        "\n%s: d_model %lld, %lld layers, %lld heads (%lld key/value), T %lld, batch %lld, "
        "%s; %d steps x %d rounds per mode\n\n",
        m.name, static_cast<long long>(base.model.d_model),
        static_cast<long long>(base.model.n_layers), static_cast<long long>(base.model.n_heads),
        static_cast<long long>(base.model.kv_heads()),
        static_cast<long long>(base.training.seq_len),
        static_cast<long long>(base.training.batch_size), opt.precision.c_str(), opt.steps,
        opt.rounds);
    std::printf(
        "| mode | step s | vs none | peak MiB | over MiB | vs none | planned MiB | "
        "max RSS MiB |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    const double mib = 1024.0 * 1024.0;
    const double none_s = bench::median(rows[0].step_s), none_over = rows[0].over;
    for (std::size_t k = 0; k < modes().size(); ++k) {
      const Row& row = rows[k];
      const double s = bench::median(row.step_s);
      std::printf("| %s | %.2f | %.2fx | %.0f | %.0f | %.2fx | %.0f | %.0f |\n", modes()[k].label,
                  s, s / none_s, row.peak / mib, row.over / mib, row.over / none_over,
                  row.planned / mib, row.rss / mib);
    }
    std::printf("\nlosses and gradient norms, %d steps: %s\n", opt.steps,
                same_losses ? "bit-identical in every mode and round" : "DIFFERENT (see above)");
    std::fflush(stdout);
    return same_losses;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Runner r{parse_options(argc, argv), {}};
  r.root = fs::temp_directory_path() / ("mixprec_ac_bench." + std::to_string(getpid()));
  fs::create_directories(r.root);
  std::printf("bench_activation_checkpoint on %s, %d threads; load average %s\n",
              bench::cpu_description().c_str(), r.opt.threads, bench::load_average().c_str());
  bool ok = true;
  try {
    for (const ModelCase& m : model_cases())
      if (r.opt.only.empty() || r.opt.only == m.name) ok = r.table(m) && ok;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_activation_checkpoint: %s\n", e.what());
    ok = false;
  }
  std::printf("load average at the end: %s\n", bench::load_average().c_str());
  if (r.opt.keep || !ok) {
    std::printf("run directories kept in %s\n", r.root.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(r.root, ec);
  }
  return ok ? 0 : 1;
}
