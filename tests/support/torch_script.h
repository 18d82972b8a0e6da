// Running a PyTorch reference script (tests/reference/*.py) from a test. The interpreter is
// Debian's, where python3-torch installs (a python3 earlier on PATH, such as a pyenv shim, may
// not have it); MIXPREC_PYTHON overrides. Tests that need torch skip when it cannot be imported
// (CI installs Debian's python3-torch and runs them).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mixprec::testing {

inline std::string python() {
  if (const char* p = std::getenv("MIXPREC_PYTHON"); p && *p) return p;
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

inline bool torch_available() {
  static const bool ok =
      std::system((python() + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

inline std::string shell_quoted(const std::string& s) {
  return "'" + s + "'";
}

// tests/reference/<name> in the source tree.
inline std::string reference_script(const std::string& name) {
  return std::string(MIXPREC_SOURCE_DIR) + "/tests/reference/" + name;
}

// Runs `script` with `args` (already quoted), its output into `log`. A non-zero exit fails the
// test with the command and that output, and returns false.
inline bool run_python(const std::string& script, const std::string& args,
                       const std::filesystem::path& log) {
  const std::string cmd = python() + " " + shell_quoted(script) + " " + args + " >" +
                          shell_quoted(log.string()) + " 2>&1";
  if (std::system(cmd.c_str()) == 0) return true;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  ADD_FAILURE() << cmd << "\n" << text.str();
  return false;
}

}  // namespace mixprec::testing
