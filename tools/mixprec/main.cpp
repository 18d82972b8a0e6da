// The `mixprec` command: one subcommand per job.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "dtype_command.h"
#include "export_command.h"
#include "memory_command.h"
#include "mixprec/backend/backend.h"
#include "mixprec/core/error.h"
#include "mixprec/numerics/convert.h"
#include "sample_command.h"
#include "tokenizer_command.h"
#include "train_command.h"
#include "usage_error.h"
#include "value_parse.h"

namespace {

// CLI11 reads "-inf", "-nan" or "-.5" as unknown options. A leading space marks a token that
// parses as a number as a value; parse_value() accepts exactly that form. Returns the
// arguments reversed, as CLI11 wants them.
std::vector<std::string> arguments_for_cli11(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a.size() > 1 && a[0] == '-' && a[1] != '-' && mixprec::cli::parse_value(a)) a = " " + a;
    args.push_back(a);
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixprec: mixed-precision training engine (FP32 masters, BF16/FP16/FP8 compute)",
               "mixprec"};
  app.set_version_flag("--version", "mixprec 0.1.0");
  app.require_subcommand(0, 1);
  int exit_code = 0;
  mixprec::cli::add_dtype_command(app, exit_code);
  mixprec::cli::add_train_command(app, exit_code);
  mixprec::cli::add_eval_command(app, exit_code);
  mixprec::cli::add_sample_command(app, exit_code);
  mixprec::cli::add_export_command(app, exit_code);
  mixprec::cli::add_tokenizer_command(app, exit_code);
  mixprec::cli::add_report_commands(app, exit_code);
  mixprec::cli::add_memory_command(app, exit_code);
  try {
    std::vector<std::string> args = arguments_for_cli11(argc, argv);
    // A bad MIXPREC_BACKEND is refused before any work (help and version still print).
    const auto asks = [&](const char* flag) {
      return std::find(args.begin(), args.end(), flag) != args.end();
    };
    if (!asks("--help") && !asks("-h") && !asks("--help-all") && !asks("--version"))
      mixprec::backend::current();
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "mixprec: {} (see --help)\n", e.what());
    return 2;
  } catch (const mixprec::cli::UsageError& e) {
    fmt::print(stderr, "mixprec: {}\n", e.what());
    return 2;
  } catch (const mixprec::Error& e) {
    fmt::print(stderr, "mixprec: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {  // a library below us (file system, JSON, allocation)
    fmt::print(stderr, "mixprec: {}\n", e.what());
    return 1;
  }
  if (app.get_subcommands().empty()) {
    fmt::print(stderr, "mixprec: a command is required (see --help)\n");
    return 2;
  }
  return exit_code;
}
