// The Python peers' processes (bench/torch_peer.py for bench_train_step: PyTorch 2.x;
// bench/gemm_peer.py for bench_gemm: PyTorch and BLIS): which Python runs them, running one with
// its output captured, reading the JSON it ends with, and why a run that printed no figure
// failed. Needs MIXPREC_SOURCE_DIR
// (the benchmarks' CMakeLists.txt).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace mixprec::bench {

// $MIXPREC_PEER_PYTHON, else scripts/peer_venv.sh's .venv-peers, else python3 on PATH (it must
// import torch 2.x).
inline std::string peer_python() {
  const char* env = std::getenv("MIXPREC_PEER_PYTHON");
  if (env && *env) return env;
  const std::string venv = std::string(MIXPREC_SOURCE_DIR) + "/.venv-peers/bin/python";
  return std::filesystem::exists(venv) ? venv : "python3";
}

// The last non-empty line of a file (a peer's stderr), or "".
inline std::string last_line_of(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  std::string last;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (!line.empty()) last = line;
  }
  std::fclose(f);
  return last;
}

// A peer run that printed no figure: killed (a mode stopped by hand, or the OOM killer) or
// failed (no PyTorch 2.x for that Python: its last error line says which).
inline std::string peer_failure(int status, const std::string& last_error) {
  if (status != -1 && WIFSIGNALED(status))
    return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  const std::string code =
      status != -1 && WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : "unknown";
  return "failed, exit " + code + (last_error.empty() ? "" : ": " + last_error) +
         " (scripts/peer_venv.sh, or MIXPREC_PEER_PYTHON)";
}

struct PeerRun {
  std::string out;         // what the script printed (its JSON)
  std::string failure;     // set when it did not exit 0
  std::string last_error;  // the last line it wrote to stderr, whatever its exit status
};

// bench/<script> with `args` under peer_python(), stdout captured, stderr's last line kept.
inline PeerRun run_python_peer(const std::string& script, const std::string& args) {
  PeerRun run;
  const std::string cmd =
      peer_python() + " " + MIXPREC_SOURCE_DIR + "/bench/" + script + " " + args;
  const std::string err_path = (std::filesystem::temp_directory_path() /
                                ("mixprec_peer_" + std::to_string(::getpid()) + ".stderr"))
                                   .string();
  FILE* pipe = popen((cmd + " 2>" + err_path).c_str(), "r");
  if (!pipe) {
    run.failure = std::string("failed to start: ") + std::strerror(errno);
    return run;
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) run.out += buf;
  const int status = pclose(pipe);
  run.last_error = last_line_of(err_path);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    run.failure = peer_failure(status, run.last_error);
  std::filesystem::remove(err_path);
  return run;
}

// The JSON object a peer printed as its last line of output (a library it loads may print
// before it), or a discarded value.
inline nlohmann::json peer_json(const std::string& out) {
  const size_t end = out.find_last_not_of("\r\n");
  const size_t begin =
      end == std::string::npos ? 0 : out.find_last_of('\n', end) + 1;  // npos+1 = 0
  const std::string line = end == std::string::npos ? "" : out.substr(begin, end + 1 - begin);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json(nlohmann::json::value_t::discarded);
}

}  // namespace mixprec::bench
