// Training configs as TOML files (config/train_config.h holds the structs): reading with
// strict keys and checked values, overrides, and writing back. The loader sits in io, above
// the model registry and the optimizer table, so the names model.kind and optimizer.name
// accept are theirs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/config/train_config.h"

namespace mixprec::config {

// Reads the TOML file at `path`, then applies `overrides` ("section.key=value",
// "model.moe.top_k=2", "run_dir=out"), each value parsed as its key's type (strings with or
// without quotes). Resolves the precision policy and checks every value.
TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from TOML text; `source_name` stands for the file name in error messages.
TrainConfig load_config_text(std::string_view toml_text, const std::string& source_name,
                             const std::vector<std::string>& overrides = {});

// The overrides `mixprec train`'s flags stand for, in its order, before the --set ones (the
// Python module's train() takes the same): --precision sets training.precision and clears
// torchtitan's pair, so the shorthand replaces whichever spelling the file used; --data,
// --run-dir, --steps set their keys. Empty or absent flags add nothing.
struct RunFlags {
  std::string precision, data, run_dir;
  std::optional<int64_t> steps;
};
std::vector<std::string> run_overrides(const RunFlags& flags, const std::vector<std::string>& sets);

// Every key, section by section; load_config_text(to_toml(c), ...) == c.
std::string to_toml(const TrainConfig& config);

// The first key (in to_toml's order) whose value differs, with both values as TOML text.
struct KeyDifference {
  std::string key;  // "optimizer.lr"
  std::string a, b;
};
// nullopt when every key starting with `prefix` ("model", "" for all) is equal.
std::optional<KeyDifference> first_difference(const TrainConfig& a, const TrainConfig& b,
                                              std::string_view prefix = "");

}  // namespace mixprec::config
