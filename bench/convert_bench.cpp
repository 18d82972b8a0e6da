// Bulk-conversion throughput: every convert.h entry point that training uses, with the AVX2
// kernels (Isa::best) and the portable scalar ones side by side, each against a multi-threaded
// memcpy moving the same number of bytes, measured in the same benchmark.
//
// Throughput is "traffic": bytes read + bytes written per call, in GB/s (10^9 bytes). The
// buffer size is that of the f32 side (default 64 MiB = 16M elements), so f32 -> bf16 reads
// 64 MiB and writes 32 MiB.
//
// The baseline: every iteration of a conversion benchmark first times a memcpy of
// (read + write) / 2 bytes, on its own buffers, then times the conversion. Such a copy reads
// and writes exactly the conversion's traffic in total, so the ratio says how close to a plain
// copy of the same volume the conversion gets whatever the element sizes (copying the f32 side
// would move more bytes and flatter narrowing). The copy runs on the same threads, one
// contiguous page-aligned slice per thread through mixprec::parallel_for, as the conversions
// split their chunks. Pairing copy and conversion iteration by iteration means both see the
// same load from other jobs on a shared machine; the ratio of each repetition is computed from
// its own pair, and the summary reports the medians over repetitions.
//
// Options (parsed before benchmark::Initialize; flags win over environment variables):
//   --threads=N  or MIXPREC_BENCH_THREADS=N   threads for conversions and memcpy (default 2)
//   --mib=N      or MIXPREC_BENCH_MIB=N       size of the f32 side in MiB (default 64)
// Google Benchmark defaults changed here (pass the flag to override):
//   --benchmark_repetitions=7 --benchmark_enable_random_interleaving=true
//   --benchmark_min_time=0.2
// Random interleaving shuffles the repetitions of all rows, so a burst of load from elsewhere
// is spread over rows instead of hitting a block of them. Timing is manual (wall time of the
// conversion alone; the work runs on OpenMP threads), so the "Time" column is the conversion
// and the "CPU" column (main thread only) includes the memcpy.
// The display is always the console reporter; use --benchmark_out=FILE for JSON.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/numerics/convert.h"
#include "mixprec/numerics/dtype.h"
#include "mixprec/numerics/rounding.h"

namespace {

using mixprec::ConvertOptions;
using mixprec::DType;
using mixprec::Isa;
using mixprec::Rounding;

constexpr std::size_t kMiB = std::size_t{1} << 20;
// Counters of each repetition, read back by the summary.
constexpr const char* kTrafficCounter = "traffic";    // conversion bytes read + written, a rate
constexpr const char* kMemcpyCounter = "memcpy_bps";  // the paired memcpy, bytes per second
constexpr const char* kRatioCounter = "ratio";        // conversion rate / memcpy rate
constexpr const char* kWaitCounter = "wait";          // see run_queue_wait_seconds()

// ---- configuration ---------------------------------------------------------------------------

struct Config {
  int threads = 2;
  std::size_t mib = 64;
};

long parse_positive(const char* what, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1) {
    std::fprintf(stderr, "bench_convert: %s must be a positive integer, got '%s'\n", what, text);
    std::exit(2);
  }
  return v;
}

// Reads the environment, then strips --threads=N / --mib=N from argv (they override it).
Config parse_config(int& argc, char** argv) {
  Config cfg;
  if (const char* e = std::getenv("MIXPREC_BENCH_THREADS"))
    cfg.threads = static_cast<int>(parse_positive("MIXPREC_BENCH_THREADS", e));
  if (const char* e = std::getenv("MIXPREC_BENCH_MIB"))
    cfg.mib = static_cast<std::size_t>(parse_positive("MIXPREC_BENCH_MIB", e));
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--threads=")) {
      cfg.threads = static_cast<int>(parse_positive("--threads", argv[i] + 10));
    } else if (arg.starts_with("--mib=")) {
      cfg.mib = static_cast<std::size_t>(parse_positive("--mib", argv[i] + 6));
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return cfg;
}

void print_help() {
  std::printf(
      "bench_convert: bulk conversion throughput vs memcpy of the same traffic\n"
      "  --threads=N  (or MIXPREC_BENCH_THREADS)  threads, default 2\n"
      "  --mib=N      (or MIXPREC_BENCH_MIB)      f32-side buffer size in MiB, default 64\n"
      "Defaults changed here: --benchmark_repetitions=7 "
      "--benchmark_enable_random_interleaving=true --benchmark_min_time=0.2\n\n");
  benchmark::PrintDefaultHelp();
}

// ---- buffers ---------------------------------------------------------------------------------

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Block = std::unique_ptr<void, FreeDeleter>;

Block allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 4096;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (!p) {
    std::fprintf(stderr, "bench_convert: cannot allocate %zu bytes\n", bytes);
    std::exit(1);
  }
  return Block(p);
}

// Allocated and paged in once, before any timing; shared by every benchmark.
struct Buffers {
  std::size_t n = 0;                  // f32 elements
  Block f32_src;                      // conversion input
  Block f32_dst;                      // widening / tf32 output
  Block narrow_dst;                   // narrowing output (2 bytes per element at most)
  std::map<DType, Block> narrow_src;  // widening inputs, encoded from f32_src
  // memcpy baseline buffers, separate from the conversion ones so the copy does not warm the
  // conversion's input; n floats each: the largest copy is (4n read + 4n written) / 2 bytes.
  Block copy_src;
  Block copy_dst;

  float* src() const { return static_cast<float*>(f32_src.get()); }
  float* dst() const { return static_cast<float*>(f32_dst.get()); }
};

Buffers* g_buffers = nullptr;

void make_buffers(Buffers& b, std::size_t mib) {
  b.n = mib * kMiB / sizeof(float);
  b.f32_src = allocate(b.n * sizeof(float));
  b.f32_dst = allocate(b.n * sizeof(float));
  b.narrow_dst = allocate(b.n * 2);
  b.copy_src = allocate(b.n * sizeof(float));
  b.copy_dst = allocate(b.n * sizeof(float));
  // Activations/gradients-like data: normal values scaled by 2^k, k uniform in [-8, 8]. This
  // puts some values in the f16 subnormal range and a few beyond e4m3's 448 (saturated), so the
  // scalar encoder's rarer branches are taken at realistic rates.
  std::mt19937 gen(20240601);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-8, 8);
  float* src = b.src();
  for (std::size_t i = 0; i < b.n; ++i) src[i] = std::ldexp(normal(gen), scale(gen));
  // Writing every byte faults every page in (reads alone could map the shared zero page).
  std::memset(b.f32_dst.get(), 0, b.n * sizeof(float));
  std::memset(b.narrow_dst.get(), 0, b.n * 2);
  std::memcpy(b.copy_src.get(), src, b.n * sizeof(float));
  std::memset(b.copy_dst.get(), 0, b.n * sizeof(float));
  for (DType t : {DType::bf16, DType::f16, DType::f8_e4m3fn, DType::f8_e5m2}) {
    Block block = allocate(b.n * mixprec::dtype_size(t));
    ConvertOptions opts;
    opts.saturate = t == DType::f8_e4m3fn;  // finite inputs for e4m3fn (no overflow NaNs)
    mixprec::convert_from_f32(src, t, block.get(), b.n, opts);
    b.narrow_src.emplace(t, std::move(block));
  }
}

// ---- conversions -----------------------------------------------------------------------------

enum class Kind { narrow, widen, tf32 };

struct Conversion {
  std::string name;  // "f32->bf16 rne"
  std::string id;    // benchmark name component: "f32->bf16/rne"
  Kind kind;
  DType narrow;  // the non-f32 side
  ConvertOptions opts;
  double target;  // minimum ratio to memcpy for the best ISA; 0 = no target given

  // Bytes read + bytes written by one call over n f32 elements.
  std::size_t traffic(std::size_t n) const {
    return n * sizeof(float) + n * mixprec::dtype_size(narrow);
  }
};

ConvertOptions options(Rounding r, bool saturate = false) {
  ConvertOptions o;
  o.rounding = r;
  o.saturate = saturate;
  o.seed = 0x5EED5EEDull;  // only read by stochastic rounding
  return o;
}

std::vector<Conversion> conversions() {
  constexpr double kPlain = 0.70, kStochastic = 0.40, kNone = 0.0;
  const Rounding rne = Rounding::nearest_even, rtz = Rounding::toward_zero,
                 sr = Rounding::stochastic;
  return {
      {"f32->bf16 rne", "f32->bf16/rne", Kind::narrow, DType::bf16, options(rne), kPlain},
      {"f32->bf16 rtz", "f32->bf16/rtz", Kind::narrow, DType::bf16, options(rtz), kPlain},
      {"f32->bf16 stochastic", "f32->bf16/sr", Kind::narrow, DType::bf16, options(sr), kStochastic},
      {"f32->f16 rne", "f32->f16/rne", Kind::narrow, DType::f16, options(rne), kPlain},
      {"f32->f16 rtz", "f32->f16/rtz", Kind::narrow, DType::f16, options(rtz), kPlain},
      {"f32->f16 stochastic", "f32->f16/sr", Kind::narrow, DType::f16, options(sr), kStochastic},
      {"f32->e4m3 rne sat", "f32->e4m3/rne_sat", Kind::narrow, DType::f8_e4m3fn, options(rne, true),
       kNone},
      {"f32->e5m2 rne", "f32->e5m2/rne", Kind::narrow, DType::f8_e5m2, options(rne), kNone},
      {"bf16->f32", "bf16->f32", Kind::widen, DType::bf16, {}, kPlain},
      {"f16->f32", "f16->f32", Kind::widen, DType::f16, {}, kPlain},
      {"e4m3->f32", "e4m3->f32", Kind::widen, DType::f8_e4m3fn, {}, kNone},
      {"e5m2->f32", "e5m2->f32", Kind::widen, DType::f8_e5m2, {}, kNone},
      // Out of place (src -> dst), so every iteration rounds the same unrounded data: in place,
      // iterations after the first would re-round tf32-exact values, on which the scalar
      // encoder's rounding branch always predicts and the scalar row would look faster.
      {"f32->tf32 rne", "f32->tf32/rne", Kind::tf32, DType::f32, options(rne), kNone},
  };
}

void run_once(const Conversion& c, Isa isa, const Buffers& b) {
  switch (c.kind) {
    case Kind::narrow:
      mixprec::convert_from_f32(b.src(), c.narrow, b.narrow_dst.get(), b.n, c.opts, isa);
      break;
    case Kind::widen:
      mixprec::widen_to_f32(c.narrow, b.narrow_src.at(c.narrow).get(), b.dst(), b.n, isa);
      break;
    case Kind::tf32:
      mixprec::round_to_tf32(b.src(), b.dst(), b.n, c.opts, isa);
      break;
  }
}

// Seconds this process's threads have spent runnable but waiting for a CPU (Linux schedstat;
// NaN where unavailable). Over a repetition, divided by wall time x threads, this is the share
// of the benchmark's CPU time that other jobs took: near 0 on an idle machine. Timings of
// short parallel calls degrade much more than that share (a preempted OpenMP thread holds up
// the whole call), so the summary shows it to tell a slow kernel from a busy machine.
double run_queue_wait_seconds() {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/self/task", ec);
  if (ec) return std::nan("");
  uint64_t total_ns = 0;
  bool any = false;
  for (const auto& task : tasks) {
    std::ifstream f(task.path() / "schedstat");
    uint64_t on_cpu_ns = 0, waiting_ns = 0;
    if (f >> on_cpu_ns >> waiting_ns) {
      total_ns += waiting_ns;
      any = true;
    }
  }
  return any ? static_cast<double>(total_ns) * 1e-9 : std::nan("");
}

void parallel_memcpy(void* dst, const void* src, std::size_t bytes) {
  constexpr int64_t kPage = 4096;
  const auto total = static_cast<int64_t>(bytes);
  const int64_t threads = mixprec::num_threads();
  const int64_t slice = ((total + threads - 1) / threads + kPage - 1) / kPage * kPage;
  mixprec::parallel_for(total, slice, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                static_cast<std::size_t>(end - begin));
  });
}

// One iteration = a memcpy of the same traffic, then the conversion, each timed on its own;
// the iteration time given to Google Benchmark is the conversion's.
void bm_convert(benchmark::State& state, const Conversion& c, Isa isa) {
  using Clock = std::chrono::steady_clock;
  const Buffers& b = *g_buffers;
  const std::size_t traffic = c.traffic(b.n);
  double copy_seconds = 0, convert_seconds = 0;
  const double wait0 = run_queue_wait_seconds();
  const Clock::time_point start = Clock::now();
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    parallel_memcpy(b.copy_dst.get(), b.copy_src.get(), traffic / 2);
    benchmark::ClobberMemory();
    const Clock::time_point t1 = Clock::now();
    run_once(c, isa, b);
    benchmark::ClobberMemory();
    const Clock::time_point t2 = Clock::now();
    const double convert = std::chrono::duration<double>(t2 - t1).count();
    copy_seconds += std::chrono::duration<double>(t1 - t0).count();
    convert_seconds += convert;
    state.SetIterationTime(convert);
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double wait = (run_queue_wait_seconds() - wait0) / (wall * mixprec::num_threads());
  using benchmark::Counter;
  const double bytes = static_cast<double>(traffic) * static_cast<double>(state.iterations());
  // A rate over the manual (conversion) time.
  state.counters[kTrafficCounter] = Counter(bytes, Counter::kIsRate, Counter::OneK::kIs1000);
  state.counters[kMemcpyCounter] =
      Counter(bytes / copy_seconds, Counter::kDefaults, Counter::OneK::kIs1000);
  state.counters[kRatioCounter] = Counter(copy_seconds / convert_seconds);
  state.counters[kWaitCounter] = Counter(wait);
}

std::string convert_name(const Conversion& c, Isa isa) {
  return "cvt/" + c.id + (isa == Isa::scalar ? "/scalar" : "/best");
}

// ---- reporting -------------------------------------------------------------------------------

// One benchmark's per-repetition values of a counter, or the median aggregate when only
// aggregates are displayed (--benchmark_display_aggregates_only).
struct Samples {
  std::vector<double> reps;
  double agg_median = std::nan("");
};

// The usual console output, plus the counters of every run kept for the summary.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      for (const char* counter : {kTrafficCounter, kMemcpyCounter, kRatioCounter, kWaitCounter}) {
        const auto it = r.counters.find(counter);
        if (it == r.counters.end()) continue;
        Samples& s = samples_[r.run_name.function_name + '#' + counter];
        if (r.run_type == Run::RT_Iteration)
          s.reps.push_back(it->second.value);
        else if (r.aggregate_name == "median")
          s.agg_median = it->second.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  const Samples* find(const std::string& name, const char* counter) const {
    const auto it = samples_.find(name + '#' + counter);
    return it == samples_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Samples> samples_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;  // as Google Benchmark's median
}

struct Stat {
  double median = std::nan("");
  double spread = std::nan("");  // (max - min) / median over the repetitions
};

Stat stat_of(const CollectingReporter& rep, const std::string& name, const char* counter,
             double scale = 1) {
  Stat s;
  const Samples* smp = rep.find(name, counter);
  if (!smp) return s;
  if (smp->reps.empty()) {
    s.median = smp->agg_median * scale;
    return s;
  }
  s.median = median(smp->reps) * scale;
  const auto [lo, hi] = std::minmax_element(smp->reps.begin(), smp->reps.end());
  s.spread = (*hi - *lo) * scale / s.median;
  return s;
}

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_summary(const CollectingReporter& rep, const std::vector<Conversion>& convs,
                   const Config& cfg, std::size_t n) {
  const std::string best = std::string("best(") + mixprec::isa_name(Isa::best) + ")";
  std::printf(
      "\nSummary: f32 side %zu MiB (%zu elements), %d thread(s). GB/s = (bytes read + bytes "
      "written) / 1e9 / s.\n"
      "memcpy copies (read + write) / 2 bytes on the same threads, timed in the same iterations "
      "as the\nconversion. Medians over repetitions. ratio = median of each repetition's "
      "conversion / memcpy rate.\nspread = (max - min) / median of the conversion rate. wait = "
      "median share of the benchmark's\nthread time spent waiting for a CPU taken by other "
      "processes. Targets apply to the best ISA;\nscalar rows are the reference for the SIMD "
      "speed-up (median best GB/s / median scalar GB/s).\n\n",
      cfg.mib, n, cfg.threads);
  const char* row = "%-22s %-10s %8s %7s %11s %6s %7s %-13s %7s %6s\n";
  std::printf(row, "conversion", "isa", "GB/s", "spread", "memcpy GB/s", "ratio", "target",
              "status", "SIMD x", "wait");
  std::printf("%s\n", std::string(22 + 10 + 8 + 7 + 11 + 6 + 7 + 13 + 7 + 6 + 9, '-').c_str());
  int passed = 0, targeted = 0;
  double worst_wait = 0;
  for (const Conversion& c : convs) {
    const Stat scalar = stat_of(rep, convert_name(c, Isa::scalar), kTrafficCounter, 1e-9);
    for (Isa isa : {Isa::best, Isa::scalar}) {
      const std::string name = convert_name(c, isa);
      const Stat s = stat_of(rep, name, kTrafficCounter, 1e-9);
      if (std::isnan(s.median)) continue;  // filtered out
      const Stat copy = stat_of(rep, name, kMemcpyCounter, 1e-9);
      const Stat ratio = stat_of(rep, name, kRatioCounter);
      const Stat wait = stat_of(rep, name, kWaitCounter);
      if (wait.median > worst_wait) worst_wait = wait.median;
      std::string target = "-", status = "(ref)", speedup;
      if (isa == Isa::best) {
        status = "no target";
        speedup = fmt("%.1fx", s.median / scalar.median);
        if (c.target > 0) {
          target = fmt("%.2f", c.target);
          ++targeted;
          const bool ok = ratio.median >= c.target;
          passed += ok ? 1 : 0;
          status = ok ? "PASS" : "BELOW TARGET";
        }
      }
      std::printf(row, c.name.c_str(), isa == Isa::scalar ? "scalar" : best.c_str(),
                  fmt("%.2f", s.median).c_str(), fmt("%.0f%%", 100 * s.spread).c_str(),
                  fmt("%.2f", copy.median).c_str(), fmt("%.2f", ratio.median).c_str(),
                  target.c_str(), status.c_str(), speedup.c_str(),
                  fmt("%.0f%%", 100 * wait.median).c_str());
    }
  }
  std::printf("\n%d of %d targeted rows PASS.\n", passed, targeted);
  if (worst_wait > 0.05)
    std::printf(
        "WARNING: other processes took up to %.0f%% of this benchmark's CPU time (wait column); "
        "rows with a\nhigh wait are unreliable (short parallel calls suffer most). Rerun on an "
        "idle machine.\n",
        100 * worst_wait);
}

// Adds a default Google Benchmark flag unless the command line already sets it.
void add_default(std::vector<char*>& args, const char* flag_and_value) {
  const std::string_view f = flag_and_value;
  const std::string_view prefix = f.substr(0, f.find('=') + 1);  // "--benchmark_xxx="
  for (std::size_t i = 1; i < args.size(); ++i)
    if (std::string_view(args[i]).starts_with(prefix)) return;
  args.push_back(const_cast<char*>(flag_and_value));
}

}  // namespace

int main(int argc, char** argv) {
  const Config cfg = parse_config(argc, argv);
  std::vector<char*> args(argv, argv + argc);
  add_default(args, "--benchmark_repetitions=7");
  add_default(args, "--benchmark_enable_random_interleaving=true");
  add_default(args, "--benchmark_min_time=0.2");
  int args_count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&args_count, args.data(), print_help);
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return 1;

  mixprec::set_num_threads(cfg.threads);
  if (!mixprec::cpu_has_avx2_f16c())
    std::fprintf(stderr,
                 "bench_convert: no AVX2/F16C on this CPU; 'best' runs the scalar "
                 "kernels\n");

  Buffers buffers;
  make_buffers(buffers, cfg.mib);
  g_buffers = &buffers;

  const std::vector<Conversion> convs = conversions();
  for (const Conversion& c : convs)
    for (Isa isa : {Isa::best, Isa::scalar})
      benchmark::RegisterBenchmark(convert_name(c, isa).c_str(), bm_convert, c, isa)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);

  std::printf("bench_convert: %zu MiB f32 side, %d thread(s), best ISA = %s\n", cfg.mib,
              cfg.threads, mixprec::isa_name(Isa::best));
  CollectingReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                    : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary(reporter, convs, cfg, buffers.n);
  benchmark::Shutdown();
  return 0;
}
