// Child processes for the benchmarks that time whole `mixprec train` runs (bench_fsdp,
// bench_activation_checkpoint): spawn with an edited environment, wait, and read what the
// kernel counted for the child (CPU time, peak RSS) and how busy the rest of the machine was.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace mixprec::bench {

// This environment with `set` (NAME=value) replacing or adding entries.
inline std::vector<std::string> environment_with(const std::vector<std::string>& set) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(
        set.begin(), set.end(), [&](const std::string& s) { return s.rfind(name + "=", 0) == 0; });
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

// CPU seconds the whole machine was busy (every core; /proc/stat's first line, steal included:
// time the hypervisor gave to other guests).
inline double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct ChildResult {
  int status = -1;
  double cpu_seconds = 0;    // the child's and its reaped descendants' (mpirun's ranks)
  double max_rss_bytes = 0;  // the largest resident set of the child or one of its descendants
};

// Runs argv (searched on PATH) with `env`, stdout and stderr into `log`.
inline ChildResult run_child(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env,
                             const std::filesystem::path& log) {
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    std::fprintf(stderr, "cannot start %s: %s\n", args[0], std::strerror(err));
    return {};
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);  // Linux: the child's usage plus its waited-for children's
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
          seconds(usage.ru_utime) + seconds(usage.ru_stime),
          1024.0 * static_cast<double>(usage.ru_maxrss)};  // ru_maxrss is in KiB on Linux
}

// The last `max_chars` characters of a file (a failed child's log, for the error message).
inline std::string file_tail(const std::filesystem::path& p, std::size_t max_chars) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return text.size() > max_chars ? "..." + text.substr(text.size() - max_chars) : text;
}

}  // namespace mixprec::bench
