// Runs a program with an argument vector (no shell: arguments are never re-parsed), stdin
// from /dev/null, stdout and stderr into one file. Internal to src/report.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace mixprec::report {

struct ProgramResult {
  int spawn_error = 0;   // errno from posix_spawnp (ENOENT: not found); 0 = it ran
  int exit_status = -1;  // the exit code; -1 when it did not exit normally
  int signal = 0;        // the signal that ended it, if any
};

// `program` is looked up on PATH unless it contains a '/'; argv[0] is `program`.
ProgramResult run_program(const std::string& program, const std::vector<std::string>& args,
                          const std::filesystem::path& output_file);

}  // namespace mixprec::report
