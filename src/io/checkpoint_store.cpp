#include "mixprec/io/checkpoint_store.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <system_error>

#include "mixprec/core/checksum.h"
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

void warn_to_stderr(const std::string& line) {
  std::cerr << "mixprec: warning: " << line << '\n';
}

// One line per tensor, "<16 hex digits> <name>" (sha256sum's layout), in the metadata: a
// reader that does not know the key (PyTorch's) still reads the file.
constexpr const char* kChecksumKey = "tensor_checksums";

uint64_t checksum_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return byte_checksum({static_cast<const uint8_t*>(c.raw_data()), c.nbytes()});
}

std::string checksum_lines(const TensorMap& tensors) {
  std::string out;
  for (const auto& [name, t] : tensors)  // a meta tensor has no bytes: save refuses it
    if (!t.is_meta()) out += fmt::format("{:016x} {}\n", checksum_of(t), name);
  return out;
}

// A flipped bit or a torn write that kept the layout valid: every tensor must match its line.
// The key is then dropped: the metadata a caller reads is the metadata it saved.
void verify_checksums(Checkpoint& c) {
  const auto listed = c.metadata.find(kChecksumKey);
  if (listed == c.metadata.end()) return;  // written before checksums, or by another program
  const std::string where = "checkpoint " + c.path;
  std::set<std::string> checked;
  std::string_view rest = listed->second;
  while (!rest.empty()) {
    const std::size_t end = std::min(rest.find('\n'), rest.size());
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    uint64_t expected = 0;
    const auto parsed = std::from_chars(
        line.data(), line.data() + std::min<std::size_t>(16, line.size()), expected, 16);
    MIXPREC_CHECK(line.size() > 17 && line[16] == ' ' && parsed.ec == std::errc() &&
                      parsed.ptr == line.data() + 16,
                  where,
                  "metadata '" + std::string(kChecksumKey) + "' has a malformed line '" +
                      quote_prefix(line) + "'");
    const std::string name(line.substr(17));
    const auto it = c.tensors.find(name);
    MIXPREC_CHECK(it != c.tensors.end(), where,
                  "metadata lists a checksum for '" + quote_prefix(name) + "', not in the file");
    MIXPREC_CHECK(checked.insert(name).second, where,
                  "metadata lists the checksum of '" + quote_prefix(name) + "' twice");
    MIXPREC_CHECK(checksum_of(it->second) == expected, where,
                  "tensor '" + name +
                      "' does not match its checksum: the file is damaged (a flipped bit, or a "
                      "write that did not finish)");
  }
  MIXPREC_CHECK(checked.size() == c.tensors.size(), where,
                "metadata lists checksums for " + std::to_string(checked.size()) + " of its " +
                    std::to_string(c.tensors.size()) + " tensors");
  c.metadata.erase(listed);
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  // Opening a FIFO waits for a writer for ever (the layout diagnosis below opens it too).
  std::error_code ec;
  const fs::file_type type = fs::status(path, ec).type();
  MIXPREC_CHECK(ec || type == fs::file_type::regular || type == fs::file_type::not_found,
                "checkpoint " + path,
                type == fs::file_type::directory
                    ? "is a directory, not a file"
                    : "is not a regular file (a FIFO, socket or device)");
  SafetensorsFile file;
  try {
    file = load_safetensors(path);
  } catch (const Error& e) {
    // Add the names of the entries involved when the file's layout is at fault.
    const std::string detail = diagnose_safetensors_layout(path);
    throw Error("checkpoint " + path, e.what_only() + (detail.empty() ? "" : "; " + detail));
  }
  Checkpoint out;
  out.path = path;
  out.step = CheckpointStore::step_of(fs::path(path).filename().string()).value_or(-1);
  out.tensors = std::move(file.tensors);
  out.metadata = std::move(file.metadata);
  verify_checksums(out);
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
  Metadata with_checksums = metadata;
  with_checksums[kChecksumKey] = checksum_lines(tensors);
  try {
    save_safetensors(path, list, with_checksums);
  } catch (const Error& e) {
    throw Error("checkpoint " + path, "save failed, earlier checkpoints kept: " + e.what_only());
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
