#include "mixprec/io/checkpoint_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "mixprec/core/error.h"
#include "mixprec/io/checkpoint_layout.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "step-";
constexpr const char* kSuffix = ".safetensors";

std::string file_name(int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%08lld", static_cast<long long>(step));
  return kPrefix + std::string(digits) + kSuffix;
}

// The message of an Error without its "[where] " prefix.
std::string what_only(const Error& e) {
  const std::string all = e.what();
  const std::size_t skip = e.where().size() + 3;
  return all.size() >= skip ? all.substr(skip) : all;
}

void warn_to_stderr(const std::string& line) {
  std::cerr << "mixprec: warning: " << line << '\n';
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile file;
  try {
    file = load_safetensors(path);
  } catch (const Error& e) {
    // Add the names of the entries involved when the file's layout is at fault.
    const std::string detail = diagnose_safetensors_layout(path);
    throw Error("checkpoint " + path, what_only(e) + (detail.empty() ? "" : "; " + detail));
  }
  Checkpoint out;
  out.path = path;
  out.step = CheckpointStore::step_of(fs::path(path).filename().string()).value_or(-1);
  out.tensors = std::move(file.tensors);
  out.metadata = std::move(file.metadata);
  return out;
}

CheckpointStore::CheckpointStore(std::string dir, int keep_last, WarningSink warn)
    : dir_(std::move(dir)), keep_last_(keep_last), warn_(std::move(warn)) {
  MIXPREC_CHECK(!dir_.empty(), "CheckpointStore", "the directory name is empty");
  MIXPREC_CHECK(
      keep_last >= 0, "CheckpointStore",
      "keep_last must be >= 0 (0 keeps every checkpoint), got " + std::to_string(keep_last));
  if (!warn_) warn_ = warn_to_stderr;
}

std::string CheckpointStore::path_for(int64_t step) const {
  MIXPREC_CHECK(step >= 0, "CheckpointStore " + dir_,
                "step must be >= 0, got " + std::to_string(step));
  return (fs::path(dir_) / file_name(step)).string();
}

std::optional<int64_t> CheckpointStore::step_of(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix))
    return std::nullopt;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int64_t step = std::stoll(digits);
  // Only the spelling save() writes: "step-000000001" would alias step 1.
  if (file_name(step) != name) return std::nullopt;
  return step;
}

std::string CheckpointStore::save(int64_t step, const TensorMap& tensors,
                                  const Metadata& metadata) {
  const std::string path = path_for(step);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  MIXPREC_CHECK(!ec, "CheckpointStore " + dir_, "cannot create the directory: " + ec.message());
  const TensorList list(tensors.begin(), tensors.end());
  try {
    save_safetensors(path, list, metadata);
  } catch (const Error& e) {
    throw Error("checkpoint " + path, "save failed, earlier checkpoints kept: " + what_only(e));
  }
  rotate(step);
  return path;
}

void CheckpointStore::rotate(int64_t just_written) const {
  if (keep_last_ == 0) return;
  std::vector<int64_t> others = steps();
  std::erase(others, just_written);
  std::sort(others.rbegin(), others.rend());  // newest first
  // The one just written counts as one of the kept, whatever its step.
  for (std::size_t i = static_cast<std::size_t>(keep_last_ - 1); i < others.size(); ++i) {
    std::error_code ec;
    if (!fs::remove(path_for(others[i]), ec) && ec)
      warn_("cannot delete old checkpoint " + path_for(others[i]) + ": " + ec.message());
  }
}

std::vector<int64_t> CheckpointStore::steps() const {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    if (auto step = step_of(entry.path().filename().string())) out.push_back(*step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<Checkpoint> CheckpointStore::load_latest() const {
  const std::vector<int64_t> all = steps();
  std::string skipped;
  std::optional<Checkpoint> found;
  for (auto it = all.rbegin(); it != all.rend() && !found; ++it) {
    try {
      found = load_checkpoint(path_for(*it));
    } catch (const Error& e) {
      skipped += std::string(skipped.empty() ? "" : "; ") + e.what();
    }
  }
  if (!skipped.empty())
    warn_("skipped checkpoints that fail validation in " + dir_ + ": " + skipped);
  return found;
}

std::optional<std::string> CheckpointStore::latest() const {
  std::optional<Checkpoint> c = load_latest();
  if (!c) return std::nullopt;
  return c->path;
}

}  // namespace mixprec::io
