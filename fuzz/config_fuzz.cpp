// libFuzzer target for the config loader. An input is TOML text, optionally followed by a line
// "--" and override lines ("training.lr=1e-3"), as the CLI's --set passes them. Every input must
// either load into a config that survives its own round trip (to_toml, then load again, gives the
// same text) or throw mixprec::Error naming the source. Anything else (a crash, a sanitizer
// report, another exception type, a stack overflow on deep nesting) is a bug.
//
//   build-fuzz-clang/fuzz/config_fuzz tests/fuzz/config   (see scripts/fuzz.sh config)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/config_file.h"

namespace {

using namespace mixprec;

constexpr const char* kSource = "fuzz-input";

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "config_fuzz: %s\n", what.c_str());
  std::abort();
}

struct Input {
  std::string_view toml;
  std::vector<std::string> overrides;
};

Input split(std::string_view text) {
  constexpr std::string_view kMarker = "\n--\n";
  const size_t marker = text.find(kMarker);
  if (marker == std::string_view::npos) return {text, {}};
  Input input{text.substr(0, marker), {}};
  std::string_view rest = text.substr(marker + kMarker.size());
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    input.overrides.emplace_back(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
  }
  return input;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Input input = split(std::string_view(reinterpret_cast<const char*>(data), size));
  std::string written;
  try {
    written = config::to_toml(config::load_config_text(input.toml, kSource, input.overrides));
  } catch (const Error& e) {
    if (std::string(e.what()).find(kSource) == std::string::npos)
      bug(std::string("error without the source: ") + e.what());
    return 0;
  }
  // A loaded config is a valid one: what it writes must load again, unchanged.
  try {
    const std::string again = config::to_toml(config::load_config_text(written, "round-trip"));
    if (again != written) bug("to_toml -> load_config_text is not a fixed point:\n" + written);
  } catch (const Error& e) {
    bug(std::string("a loaded config does not reload: ") + e.what() + "\n" + written);
  }
  return 0;
}
