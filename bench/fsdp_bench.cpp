// Fully sharded training over MPI, measured on whole `mixprec train` runs (child processes):
//
//   speed  A = 1 rank x 2 threads, B = `mpirun -np 2` x 1 thread each, alternating A B A B ...
//          so drift hits both; per run the median tokens/s of the steps after the first 3
//          (rank 0's metrics.jsonl: global batch tokens / step time); the medians over runs and
//          B/A (the target: >= 0.85).
//   bytes  one B run per precision (bf16-mixed, fp32): the median comm_bytes per step of rank 0
//          (dist::CommStats) against the formula computed here from the layout
//          (dist::ShardLayout of the config's model at W = 2, nothing allocated):
//            all-gather     (W-1)/W * (P_root + 2 sum_blocks P_block - P_last) *
//                           sizeof(param_dtype) (forward gathers every unit, backward each block
//                           but the last again: its weights were freed after its forward; the
//                           root and the last block stay gathered)
//            reduce-scatter (W-1)/W * sum_units P_unit * sizeof(reduce_dtype)
//            all-reduce     2(W-1)/W * (8 + 8 + 32 + 8 n): the found-inf flag (i64,
//                           GradScaler::unscale), the squared gradient norm (f64), the 4 loss
//                           parts (f64), a used-this-step flag per parameter (i64, n of them)
//          with P_u the unit's padded size. Then the same run over TCP on the loopback
//          (`--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo`) for 3 and 13
//          steps: the growth of lo's transmit bytes, (delta13 - delta3) / 10 steps / 2 ranks, is
//          what each rank put on the wire per step (TCP/IP and MPI headers included).
//
// Usage: bench_fsdp [--config=PATH] [--steps=N] [--reps=N] [--precision=P]
//                   [--only=speed|bytes] [--mpi-flags="FLAGS"] [--keep]
// --mpi-flags adds mpirun options to the B runs of the speed table (e.g. "--bind-to none");
// --keep leaves the run directories (printed) for inspection.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "child_process.h"
#include "mixprec/config/train_config.h"
#include "mixprec/dist/shard_layout.h"
#include "mixprec/io/config_file.h"
#include "mixprec/models/registry.h"
#include "mixprec/numerics/dtype.h"

namespace fs = std::filesystem;
using namespace mixprec;
using bench::ChildResult;
using bench::environment_with;
using bench::file_tail;
using bench::load_average;
using bench::machine_busy_seconds;
using bench::run_child;

namespace {

constexpr const char* kUsage =
    "bench_fsdp [--config=PATH] [--steps=N] [--reps=N] [--precision=P] [--only=speed|bytes] "
    "[--mpi-flags=\"FLAGS\"] [--keep]";
constexpr int kWorld = 2;
constexpr int kSkipSteps = 3;  // warm-up steps left out of each run's median
// A run is "quiet" when the rest of the machine used less than this many cores meanwhile.
constexpr double kQuietCores = 0.25;

struct Options {
  std::string config = "configs/moe_small.toml";
  int steps = 20;
  int reps = 3;
  std::string precision;  // "" = the config's
  std::string only;       // "", "speed" or "bytes"
  std::vector<std::string> mpi_flags;
  bool keep = false;
};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

[[noreturn]] void usage_error(const std::string& what) {
  bench::usage_exit("bench_fsdp", kUsage, what);
}

int positive_int(const std::string& key, const std::string& v) {
  return bench::positive_int_option("bench_fsdp", kUsage, key, v);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) { return bench::option_value(a, key); };
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s\n", kUsage);
      std::exit(0);
    } else if (auto v = value("--config")) {
      o.config = *v;
    } else if (auto v = value("--steps")) {
      o.steps = positive_int("--steps", *v);
    } else if (auto v = value("--reps")) {
      o.reps = positive_int("--reps", *v);
    } else if (auto v = value("--precision")) {
      o.precision = *v;
    } else if (auto v = value("--only")) {
      if (*v != "speed" && *v != "bytes") usage_error("--only takes speed or bytes");
      o.only = *v;
    } else if (auto v = value("--mpi-flags")) {
      o.mpi_flags = split_words(*v);
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      usage_error("unknown option '" + a + "'");
    }
  }
  if (o.steps <= kSkipSteps) usage_error("--steps must be > " + std::to_string(kSkipSteps));
  // A relative config is looked up from here, then from the source tree.
  if (!fs::exists(o.config) && fs::exists(fs::path(MIXPREC_SOURCE_DIR) / o.config))
    o.config = (fs::path(MIXPREC_SOURCE_DIR) / o.config).string();
  if (!fs::exists(o.config)) usage_error("no config '" + o.config + "'");
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// ---- child processes: bench/child_process.h -------------------------------

// The per-step values of rank 0's metrics.jsonl.
struct StepSeries {
  std::vector<double> tokens_per_s, step_ms, comm_bytes;
  // Cores' worth of CPU the rest of the machine used while the run went (other jobs: on a
  // shared 2-core machine the main source of noise).
  double others_cores = 0;
};

StepSeries read_metrics(const fs::path& jsonl) {
  StepSeries s;
  std::ifstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || j.value("type", "") != "train") continue;
    s.tokens_per_s.push_back(j.at("tokens_per_s").get<double>());
    s.step_ms.push_back(j.at("step_ms").get<double>());
    s.comm_bytes.push_back(j.at("comm_bytes").get<double>());
  }
  return s;
}

// The values of steps [from, end).
std::vector<double> after(const std::vector<double>& v, std::size_t from) {
  return v.size() > from
             ? std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(from), v.end())
             : v;
}

enum class Launch { one_rank_two_threads, two_ranks, two_ranks_tcp };

struct Runner {
  Options opt;
  fs::path root;  // every run's directory lives here
  int runs = 0;

  // The launch line (argv) of one training run into run_dir.
  std::vector<std::string> command(Launch launch, int steps, const std::string& precision,
                                   const fs::path& run_dir,
                                   const std::vector<std::string>& mpi_flags) const {
    std::vector<std::string> argv;
    const int threads = launch == Launch::one_rank_two_threads ? 2 : 1;
    if (launch != Launch::one_rank_two_threads) {
      argv = {"mpirun", "--oversubscribe",  "-np", std::to_string(kWorld),
              "-x",     "OMP_NUM_THREADS=1"};
      if (launch == Launch::two_ranks_tcp)
        argv.insert(argv.end(), {"--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca",
                                 "btl_tcp_if_include", "lo", "--mca", "btl_tcp_links", "1"});
      argv.insert(argv.end(), mpi_flags.begin(), mpi_flags.end());
    }
    argv.insert(argv.end(),
                {MIXPREC_CLI_PATH, "train", opt.config, "--steps", std::to_string(steps),
                 "--progress", "quiet", "--run-dir", run_dir.string(), "--set",
                 "training.threads=" + std::to_string(threads), "--set", "training.eval_every=0",
                 "--set", "checkpoint.enable=false", "--set", "metrics.plot=false", "--set",
                 "checkpoint.export_bf16=false"});
    if (!precision.empty()) argv.insert(argv.end(), {"--precision", precision});
    return argv;
  }

  // One training run; its per-step metrics, or nullopt (the log's tail printed) on failure.
  std::optional<StepSeries> train(Launch launch, int steps, const std::string& precision,
                                  const std::vector<std::string>& mpi_flags = {}) {
    const fs::path dir = root / ("run" + std::to_string(++runs));
    fs::create_directories(dir);
    const std::vector<std::string> argv = command(launch, steps, precision, dir, mpi_flags);
    std::vector<std::string> set{std::string("OMP_NUM_THREADS=") +
                                 (launch == Launch::one_rank_two_threads ? "2" : "1")};
    if (geteuid() == 0)  // OpenMPI refuses root without these
      set.insert(set.end(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
    const double busy_before = machine_busy_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    const ChildResult child = run_child(argv, environment_with(set), dir / "log.txt");
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int rc = child.status;
    StepSeries s = read_metrics(dir / "metrics.jsonl");
    s.others_cores = std::max(0.0, machine_busy_seconds() - busy_before - child.cpu_seconds) / wall;
    if (rc != 0 || s.tokens_per_s.size() != static_cast<std::size_t>(steps)) {
      std::string line;
      for (const std::string& a : argv) line += a + " ";
      std::fprintf(stderr, "bench_fsdp: run failed (exit %d, %zu steps logged): %s\n%s\n", rc,
                   s.tokens_per_s.size(), line.c_str(), file_tail(dir / "log.txt", 2000).c_str());
      return std::nullopt;
    }
    return s;
  }
};

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// ---- speed ----------------------------------------------------------------

bool speed_table(Runner& r) {
  const Options& o = r.opt;
  std::printf(
      "== speed: %d steps per run, median tokens/s of steps %d..%d; A and B alternate, %d "
      "rep(s)\n",
      o.steps, kSkipSteps + 1, o.steps, o.reps);
  std::printf(
      "A: OMP_NUM_THREADS=2 %s\n",
      joined(r.command(Launch::one_rank_two_threads, o.steps, o.precision, "<tmp>", {})).c_str());
  std::printf(
      "B: %s\n\n",
      joined(r.command(Launch::two_ranks, o.steps, o.precision, "<tmp>", o.mpi_flags)).c_str());
  std::printf("%-4s %-22s %12s %10s %10s %10s %14s\n", "rep", "launch", "tokens/s", "step ms",
              "min ms", "max ms", "others (cores)");
  std::vector<double> a_rates, b_rates, ratios, quiet_ratios;
  for (int rep = 1; rep <= o.reps; ++rep) {
    double a_rate = 0, a_others = 0;
    for (const Launch launch : {Launch::one_rank_two_threads, Launch::two_ranks}) {
      const bool is_a = launch == Launch::one_rank_two_threads;
      const std::optional<StepSeries> s =
          r.train(launch, o.steps, o.precision, is_a ? std::vector<std::string>{} : o.mpi_flags);
      if (!s) return false;
      const std::vector<double> ms = after(s->step_ms, kSkipSteps);
      const double rate = median(after(s->tokens_per_s, kSkipSteps));
      std::printf("%-4d %-22s %12.0f %10.1f %10.1f %10.1f %14.2f\n", rep,
                  is_a ? "A 1 rank x 2 threads" : "B 2 ranks x 1 thread", rate, median(ms),
                  *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()),
                  s->others_cores);
      std::fflush(stdout);
      (is_a ? a_rates : b_rates).push_back(rate);
      if (is_a) {
        a_rate = rate;
        a_others = s->others_cores;
      } else {
        ratios.push_back(rate / a_rate);
        if (std::max(a_others, s->others_cores) < kQuietCores)
          quiet_ratios.push_back(rate / a_rate);
      }
    }
  }
  const double a = median(a_rates), b = median(b_rates);
  std::printf("\n%-24s %12s\n", "launch (median of reps)", "tokens/s");
  std::printf("%-24s %12.0f\n", "A 1 rank x 2 threads", a);
  std::printf("%-24s %12.0f\n", "B 2 ranks x 1 thread", b);
  std::printf("B/A = %.2f (target >= 0.85; median of per-rep ratios %.2f)\n", b / a,
              median(ratios));
  if (quiet_ratios.empty())
    std::printf(
        "no quiet rep (other jobs used >= %.2f cores during A or B): the ratio above is "
        "the machine's load as much as ours\n\n",
        kQuietCores);
  else
    std::printf("quiet reps (other jobs < %.2f cores during both runs): %zu, median B/A %.2f\n\n",
                kQuietCores, quiet_ratios.size(), median(quiet_ratios));
  return true;
}

// ---- bytes ----------------------------------------------------------------

struct Formula {
  std::string param_dtype, reduce_dtype;
  double all_gather = 0, reduce_scatter = 0, all_reduce = 0;
  double total() const { return all_gather + reduce_scatter + all_reduce; }
};

// Bytes rank 0 hands to collectives in one training step at world size kWorld, from the
// layout of the config's model (see the top of this file).
Formula formula_for(const std::string& config_path, const std::string& precision) {
  std::vector<std::string> overrides;
  if (!precision.empty())
    overrides = {"training.precision=" + precision,
                 "training.mixed_precision_param=", "training.mixed_precision_reduce="};
  const config::TrainConfig c = config::load_config(config_path, overrides);
  // Described: nothing allocated.
  const std::unique_ptr<models::Model> model = models::make_model(c.model);
  const dist::ShardLayout layout(*model, kWorld);
  double root = 0, blocks = 0, last_block = 0;
  for (const dist::UnitLayout& u : layout.units()) {
    (u.name == "root" ? root : blocks) += static_cast<double>(u.padded);
    if (u.name != "root") last_block = static_cast<double>(u.padded);
  }
  const double w = kWorld, share = (w - 1) / w;
  const DType pd = c.training.policy.param_dtype, rd = c.training.policy.reduce_dtype;
  Formula f;
  f.param_dtype = dtype_name(pd);
  f.reduce_dtype = dtype_name(rd);
  f.all_gather = share * (root + 2 * blocks - last_block) * static_cast<double>(dtype_size(pd));
  f.reduce_scatter = share * (root + blocks) * static_cast<double>(dtype_size(rd));
  // found-inf flag (i64) + squared gradient norm (f64) + loss, ce, aux, z (f64 each) + one
  // "this step's graph read it" flag (i64) per parameter (ShardedModel::finish_backward); the
  // optimizer here is AdamW (Adam-mini would add its cut blocks' sums).
  const double params = static_cast<double>(model->parameters().specs().size());
  f.all_reduce = 2 * share * (8 + 8 + 4 * 8 + 8 * params);
  return f;
}

// Transmit bytes of the loopback interface so far, or -1.
double loopback_tx_bytes() {
  std::ifstream in("/proc/net/dev");
  for (std::string line; std::getline(in, line);) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (name != "lo") continue;
    std::istringstream fields(line.substr(colon + 1));
    double v[9] = {};
    for (double& x : v) fields >> x;  // receive: 8 fields, then transmit bytes
    return fields ? v[8] : -1;
  }
  return -1;
}

// The growth of lo's transmit bytes over one TCP run of `steps` steps, or -1.
double tcp_run_bytes(Runner& r, int steps, const std::string& precision) {
  const double before = loopback_tx_bytes();
  if (!r.train(Launch::two_ranks_tcp, steps, precision)) return -1;
  const double after_run = loopback_tx_bytes();
  return before < 0 || after_run < 0 ? -1 : after_run - before;
}

bool bytes_table(Runner& r) {
  const Options& o = r.opt;
  constexpr int kSteps = 6, kWireShort = 3, kWireLong = 13;
  std::printf("== bytes per step per rank (rank 0), world size %d, %d-step B runs\n", kWorld,
              kSteps);
  std::printf("B: %s\n",
              joined(r.command(Launch::two_ranks, kSteps, "<precision>", "<tmp>", {})).c_str());
  std::printf(
      "wire: lo transmit bytes around %s, for %d and %d steps: (delta%d - delta%d) / %d "
      "steps / %d ranks\n",
      joined(r.command(Launch::two_ranks_tcp, kWireShort, "<precision>", "<tmp>", {})).c_str(),
      kWireShort, kWireLong, kWireLong, kWireShort, kWireLong - kWireShort, kWorld);
  struct Row {
    std::string precision;
    Formula f;
    double measured = 0, spread = 0, wire = -1, d_short = -1, d_long = -1;
  };
  std::vector<Row> rows;
  for (const char* precision : {"bf16-mixed", "fp32"}) {
    Row row{precision, formula_for(o.config, precision)};
    const std::optional<StepSeries> s = r.train(Launch::two_ranks, kSteps, precision);
    if (!s) return false;
    row.measured = median(s->comm_bytes);
    row.spread = *std::max_element(s->comm_bytes.begin(), s->comm_bytes.end()) -
                 *std::min_element(s->comm_bytes.begin(), s->comm_bytes.end());
    row.d_short = tcp_run_bytes(r, kWireShort, precision);
    row.d_long = tcp_run_bytes(r, kWireLong, precision);
    if (row.d_short > 0 && row.d_long > row.d_short)
      row.wire = (row.d_long - row.d_short) / (kWireLong - kWireShort) / kWorld;
    rows.push_back(row);
  }
  std::printf("\n%-11s %-6s %14s %16s %14s %15s %14s %7s %14s %10s\n", "precision", "param",
              "all-gather B", "reduce-scatter B", "all-reduce B", "formula total", "measured",
              "ratio", "wire (lo) B", "wire/form.");
  for (const Row& row : rows) {
    char wire[32] = "n/a", wire_ratio[32] = "n/a";
    if (row.wire > 0) {
      std::snprintf(wire, sizeof wire, "%.0f", row.wire);
      std::snprintf(wire_ratio, sizeof wire_ratio, "%.3f", row.wire / row.f.total());
    }
    std::printf("%-11s %-6s %14.0f %16.0f %14.0f %15.0f %14.0f %7.4f %14s %10s\n",
                row.precision.c_str(), row.f.param_dtype.c_str(), row.f.all_gather,
                row.f.reduce_scatter, row.f.all_reduce, row.f.total(), row.measured,
                row.measured / row.f.total(), wire, wire_ratio);
  }
  std::printf("bf16 all-gather bytes / fp32 all-gather bytes = %.2f (formula)\n",
              rows[0].f.all_gather / rows[1].f.all_gather);
  for (const Row& row : rows) {
    std::printf(
        "%s: reduce dtype %s; measured comm_bytes spread over steps (max-min) %.0f; lo "
        "transmit deltas %.0f (%d steps), %.0f (%d steps)\n",
        row.precision.c_str(), row.f.reduce_dtype.c_str(), row.spread, row.d_short, kWireShort,
        row.d_long, kWireLong);
    if (row.wire <= 0) {
      std::printf("%s: the lo counters did not grow with the step count: no wire column\n",
                  row.precision.c_str());
      continue;
    }
  }
  std::printf("\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Runner r{parse_options(argc, argv), {}};
  const Options& o = r.opt;
  r.root = fs::temp_directory_path() / ("mixprec_fsdp_bench." + std::to_string(getpid()));
  fs::create_directories(r.root);
  const char* amx = std::getenv("MIXPREC_AMX");
  std::printf("bench_fsdp on %s: config %s, precision %s; %ld cores; load average %s\n",
              bench::cpu_description().c_str(), o.config.c_str(),
              o.precision.empty() ? "(the config's)" : o.precision.c_str(),
              sysconf(_SC_NPROCESSORS_ONLN), load_average().c_str());
  std::printf(
      "environment passed through unchanged: MIXPREC_AMX=%s (unset = AMX where the CPU "
      "has it); OpenBLAS runs 1 thread (the library pins it)\n\n",
      amx ? amx : "<unset>");
  std::fflush(stdout);
  bool ok = true;
  try {
    if (o.only != "bytes") ok = speed_table(r);
    if (ok && o.only != "speed") ok = bytes_table(r);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_fsdp: %s\n", e.what());
    ok = false;
  }
  std::printf("load average at the end: %s\n", load_average().c_str());
  if (o.keep || !ok) {
    std::printf("run directories kept in %s\n", r.root.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(r.root, ec);
  }
  return ok ? 0 : 1;
}
