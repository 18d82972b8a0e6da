// Timing and command-line helpers shared by the hand-written benchmark programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/core/parallel.h"
#include "mixprec/cpu/gemm.h"

namespace mixprec::bench {

inline double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Options {
  int reps = 1;
  int threads = 2;
  std::vector<std::string> flags;  // bare flags given (e.g. "--quick")
};

// Parses --reps=N, --threads=N and the bare flags in `allowed`; --help prints `usage` and
// exits 0, anything else prints it and exits 2.
inline Options parse_options(int argc, char** argv, int default_reps,
                             const std::vector<std::string>& allowed, const char* usage) {
  Options o;
  o.reps = default_reps;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: %s\n", usage);
      std::exit(0);
    }
    if (a.rfind("--reps=", 0) == 0) {
      o.reps = std::max(1, std::atoi(a.c_str() + 7));
    } else if (a.rfind("--threads=", 0) == 0) {
      o.threads = std::max(1, std::atoi(a.c_str() + 10));
    } else if (std::find(allowed.begin(), allowed.end(), a) != allowed.end()) {
      o.flags.push_back(a);
    } else {
      std::fprintf(stderr, "unknown option '%s'\nusage: %s\n", a.c_str(), usage);
      std::exit(2);
    }
  }
  return o;
}

// A threaded memcpy moving `traffic` bytes (read + write) through buffers of at most
// `max_buffer` bytes each way (copied as often as needed): the baseline memory-bound
// kernels are measured against.
struct MemcpyBaseline {
  std::vector<char> src, dst;
  double traffic;
  explicit MemcpyBaseline(double traffic_bytes, double max_buffer = 1e18)
      : src(static_cast<std::size_t>(std::min(traffic_bytes / 2, max_buffer)), 1),
        dst(src.size(), 0),
        traffic(traffic_bytes) {}
  void run() {
    const auto n = static_cast<int64_t>(src.size());
    const int64_t grain = std::max<int64_t>(1 << 16, (n + num_threads() - 1) / num_threads());
    for (double moved = 0; moved < traffic; moved += 2.0 * static_cast<double>(n))
      parallel_for(n, grain, [&](int64_t b, int64_t e) {
        std::memcpy(dst.data() + b, src.data() + b, static_cast<std::size_t>(e - b));
      });
  }
};

// Medians over `reps` repetitions, each timing `op` (after `setup`, untimed) and then the
// memcpy of the same bytes, so both see the same machine state.
struct VsMemcpy {
  double gbps, memcpy_gbps, ratio;  // ratio: median of per-repetition memcpy time / op time
};
inline VsMemcpy measure_vs_memcpy(
    double bytes, int reps, const std::function<void()>& op,
    const std::function<void()>& setup = [] {}, double max_buffer = 1e18) {
  MemcpyBaseline copy(bytes, max_buffer);
  setup();
  op();  // warm-up
  copy.run();
  std::vector<double> rate, copy_rate, ratio;
  for (int i = 0; i < reps; ++i) {
    setup();
    const double t = seconds_of(op), tc = seconds_of([&] { copy.run(); });
    rate.push_back(bytes / t * 1e-9);
    copy_rate.push_back(bytes / tc * 1e-9);
    ratio.push_back(tc / t);
  }
  return {median(rate), median(copy_rate), median(ratio)};
}

// The CPU a table was measured on: /proc/cpuinfo's model name (a virtual machine's can be as
// vague as "Intel(R) Xeon(R) Processor"), the widest vector ISA, and where bf16 GEMMs run.
inline std::string cpu_description() {
  std::string name = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("model name")) {
      name = line.substr(line.find(':') + 2);
      break;
    }
  __builtin_cpu_init();
  const char* isa = __builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2";
  return name + " (" + isa + "; bf16 GEMMs: " + cpu::bf16_gemm_path() + ")";
}

// /proc/loadavg's 1-, 5- and 15-minute load averages.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Option parsing of the programs that take --key=value options.
// The value of `arg` when it is "key=value", nullopt when it is another option.
inline std::optional<std::string> option_value(const std::string& arg, const char* key) {
  const std::string k = std::string(key) + "=";
  if (arg.rfind(k, 0) != 0) return std::nullopt;
  return arg.substr(k.size());
}

// Prints what was wrong and the usage, and exits 2.
[[noreturn]] inline void usage_exit(const char* program, const char* usage,
                                    const std::string& what) {
  std::fprintf(stderr, "%s: %s\nusage: %s\n", program, what.c_str(), usage);
  std::exit(2);
}

// `value` of option `key` as a positive int, or usage_exit.
inline int positive_int_option(const char* program, const char* usage, const std::string& key,
                               const std::string& value) {
  const int n = std::atoi(value.c_str());
  if (n < 1) usage_exit(program, usage, key + " needs a positive integer, got '" + value + "'");
  return n;
}

inline bool has_flag(const Options& o, const std::string& flag) {
  return std::find(o.flags.begin(), o.flags.end(), flag) != o.flags.end();
}

}  // namespace mixprec::bench
