// Running the built `mixprec` binary (path in MIXPREC_CLI, set by CTest) as a child process.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace mixprec::testing {

struct RunResult {
  int exit_code = -1;  // exit status, or 128 + signal number
  std::string out;
  std::string err;
};

inline std::string slurp(FILE* f) {
  std::string s;
  std::rewind(f);
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline const char* cli_path() {
  const char* exe = std::getenv("MIXPREC_CLI");
  if (exe == nullptr || *exe == '\0') {
    ADD_FAILURE() << "MIXPREC_CLI is not set: export MIXPREC_CLI=/path/to/build/mixprec";
    return nullptr;
  }
  return exe;
}

// Starts `$MIXPREC_CLI args...` with stdin from `input` (a file; /dev/null by default) and
// stdout/stderr into the given files; returns the child's pid, or -1 (with a test failure)
// when it cannot start.
inline pid_t start_cli(const std::vector<std::string>& args, FILE* out, FILE* err,
                       const std::string& input = "/dev/null") {
  const char* exe = cli_path();
  if (exe == nullptr) return -1;
  std::vector<std::string> storage{exe};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, input.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fileno(out), 1);
  posix_spawn_file_actions_adddup2(&actions, fileno(err), 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "cannot run " << exe << ": " << std::strerror(rc);
    return -1;
  }
  return pid;
}

// The child's exit status, or 128 + the signal that ended it.
inline int wait_cli(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `$MIXPREC_CLI args...` to completion, stdin from the file `input`; stdout and stderr go
// to separate temporary files (no pipe-buffer deadlock however long the output).
inline RunResult run_cli(const std::vector<std::string>& args,
                         const std::string& input = "/dev/null") {
  RunResult r;
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  if (out == nullptr || err == nullptr) {
    ADD_FAILURE() << "tmpfile() failed";
  } else if (const pid_t pid = start_cli(args, out, err, input); pid > 0) {
    r.exit_code = wait_cli(pid);
    r.out = slurp(out);
    r.err = slurp(err);
  }
  if (out) std::fclose(out);
  if (err) std::fclose(err);
  return r;
}

inline std::string describe(const std::vector<std::string>& args, const RunResult& r) {
  std::string cmd = "mixprec";
  for (const std::string& a : args) cmd += " '" + a + "'";
  return cmd + "\n  exit " + std::to_string(r.exit_code) + "\n  stdout:\n" + r.out +
         "\n  stderr:\n" + r.err;
}

}  // namespace mixprec::testing
