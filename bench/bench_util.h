// Timing and command-line helpers shared by the hand-written benchmark programs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

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

inline bool has_flag(const Options& o, const std::string& flag) {
  return std::find(o.flags.begin(), o.flags.end(), flag) != o.flags.end();
}

}  // namespace mixprec::bench
