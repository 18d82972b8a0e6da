// Hugging Face checkpoint folders (hf_folder.h): the shard plan, the index, and reading both
// back with every file name and tensor accounted for.
#include "mixprec/io/hf_folder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/regular_file.h"
#include "text_bounds.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMaxJsonBytes = 64ull << 20;  // config.json and the index: far above real ones

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error("hf " + where, what);
}

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomically(
      path.string(), [&](int fd) { write_all(fd, text.data(), text.size(), path.string()); },
      "hf " + path.string());
}

std::string read_text(const fs::path& path) {
  std::error_code ec;
  if (fs::status(path, ec).type() == fs::file_type::not_found)
    fail(path.string(), "does not exist");
  // A FIFO, a device or a symlink loop is refused naming the path, not waited on or read.
  return read_regular_file(path, kMaxJsonBytes, "hf " + path.string());
}

json parse_json(const std::string& text, const std::string& where) {
  if (json_nesting_depth(text) > kMaxNesting)
    fail(where, "nests deeper than " + std::to_string(kMaxNesting) + " levels");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail(where, "is not a JSON object");
  return j;
}

uint64_t tensor_bytes(const Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
}

// Tensors in order, a new shard whenever the next one would pass the limit.
std::vector<TensorList> plan_shards(const TensorList& tensors, uint64_t max_bytes) {
  std::vector<TensorList> shards(1);
  uint64_t bytes = 0;
  for (const auto& entry : tensors) {
    const uint64_t b = tensor_bytes(entry.second);
    if (!shards.back().empty() && bytes + b > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(entry);
    bytes += b;
  }
  return shards;
}

// A shard's file name from the index: a plain name in the folder, nothing that climbs out.
void check_shard_name(const std::string& name, const std::string& where) {
  const fs::path p(name);
  if (name.empty() || p.has_parent_path() || p.is_absolute() || name == "." || name == ".." ||
      !name.ends_with(".safetensors"))
    fail(where,
         "names the file '" + name + "': a shard must be a *.safetensors file in the folder");
}

void add_file(HfCheckpoint& out, const fs::path& path, const std::set<std::string>* expected) {
  SafetensorsFile file = load_safetensors(path.string());
  for (auto& [name, tensor] : file.tensors) {
    if (expected && !expected->contains(name))
      fail(path.string(), "holds '" + name + "', which " + kHfIndexFile + " maps elsewhere");
    if (out.tensors.contains(name)) fail(path.string(), "repeats the tensor '" + name + "'");
    out.tensors.emplace(name, std::move(tensor));
  }
  if (expected && file.tensors.size() != expected->size())
    for (const std::string& name : *expected)
      if (!out.tensors.contains(name))
        fail(path.string(), "lacks '" + name + "', which " + kHfIndexFile + " maps to it");
}

// The folder an export writes to must be new or empty: an export never replaces weights.
void check_new_or_empty(const fs::path& target, const std::string& where) {
  std::error_code ec;
  const fs::file_type type = fs::status(target, ec).type();
  if (type == fs::file_type::not_found) return;
  if (ec) fail(where, "cannot examine the folder: " + ec.message() + " (nothing was written)");
  if (type != fs::file_type::directory || !fs::is_empty(target, ec) || ec)
    fail(where,
         "already exists and is not an empty folder; choose a new one (nothing was written)");
}

// What create_missing_folders made, innermost first, each only while it is still empty.
void remove_empty_folders(const std::vector<fs::path>& folders) {
  for (const fs::path& f : folders) {
    std::error_code ignored;
    fs::remove(f, ignored);  // fails, harmlessly, on a folder someone else has put files in
  }
}

// Creates the missing folders of `dir`, outermost first; returns them so that a failed export
// can remove them again.
std::vector<fs::path> create_missing_folders(const fs::path& dir, const std::string& where) {
  std::vector<fs::path> missing;  // innermost first
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    if (ec) break;
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  if (ec) fail(where, "cannot examine " + dir.string() + ": " + ec.message());
  std::vector<fs::path> created;  // innermost first, as remove_empty_folders wants them
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, ec) && ec) {
      remove_empty_folders(created);
      fail(where, "cannot create the folder " + it->string() + ": " + ec.message());
    }
    created.insert(created.begin(), *it);
  }
  return created;
}

// A fresh hidden folder beside the target (".NAME.partial-XXXXXX"), removed with everything in
// it unless publish_as() renamed it into place.
class StagingFolder {
 public:
  StagingFolder(const fs::path& parent, const std::string& name, const std::string& where) {
    std::string pattern = (parent / ("." + name + ".partial-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      fail(where, "cannot create a staging folder in " + parent.string() + ": " +
                      std::strerror(errno) + " (nothing was written)");
    path_ = pattern;
    ::chmod(path_.c_str(), 0755);  // mkdtemp makes it private; an export is an ordinary folder
  }
  ~StagingFolder() {
    if (published_) return;
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  const fs::path& path() const { return path_; }

  // rename(2): atomic, and it replaces an empty folder at `target`.
  void publish_as(const fs::path& target, const std::string& where) const {
    if (::rename(path_.c_str(), target.c_str()) != 0)
      fail(where, std::string("cannot move the finished export into place: ") +
                      std::strerror(errno) + " (nothing was exported)");
    published_ = true;
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    const int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {  // make the rename durable
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  fs::path path_;
  mutable bool published_ = false;
};

// config.json and the weights (one file, or shards and their index) into `folder`. Errors name
// the export (`where`) and the file that could not be written, with the OS's reason.
void write_files(const fs::path& folder, const std::string& where, const std::string& config_json,
                 const TensorList& tensors, uint64_t max_shard_bytes) {
  const auto stage = [&](const std::string& file, const std::function<void(const fs::path&)>& w) {
    try {
      w(folder / file);
    } catch (const Error& e) {
      fail(where, "cannot write " + file + ": " + e.what_only() +
                      " (nothing was exported; the same command can be run again)");
    }
  };
  const std::vector<TensorList> shards =
      plan_shards(tensors, std::max<uint64_t>(max_shard_bytes, 1));
  const Metadata metadata{{"format", "pt"}};
  if (shards.size() == 1) {
    stage(kHfWeightsFile,
          [&](const fs::path& p) { save_safetensors(p.string(), shards[0], metadata); });
  } else {
    json weight_map = json::object();
    uint64_t total = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const std::string file =
          fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
      stage(file, [&](const fs::path& p) { save_safetensors(p.string(), shards[i], metadata); });
      for (const auto& [name, t] : shards[i]) {
        weight_map[name] = file;
        total += tensor_bytes(t);
      }
    }
    const json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    stage(kHfIndexFile, [&](const fs::path& p) { write_text(p, index.dump(2) + "\n"); });
  }
  stage(kHfConfigFile, [&](const fs::path& p) { write_text(p, config_json); });
}

}  // namespace

void write_hf_folder(const std::string& dir, const std::string& config_json,
                     const TensorList& tensors, uint64_t max_shard_bytes) {
  fs::path target = fs::path(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/" is "out"
  check_new_or_empty(target, dir);
  // All or nothing: every file goes into a staging folder beside the target, renamed into place
  // at the end. A failure (a full disk) removes it and any parent the export created, so the
  // target is as it was and a retry works.
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::vector<fs::path> created = create_missing_folders(parent, dir);
  try {
    const StagingFolder staging(parent, target.filename().string(), dir);
    write_files(staging.path(), dir, config_json, tensors, max_shard_bytes);
    staging.publish_as(target, dir);
  } catch (...) {
    remove_empty_folders(created);
    throw;
  }
}

HfCheckpoint read_hf_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir, "is not a folder (a Hugging Face checkpoint is one)");
  const fs::path root(dir);
  HfCheckpoint out;
  out.dir = dir;
  out.config_json = read_text(root / kHfConfigFile);
  parse_json(out.config_json, (root / kHfConfigFile).string());
  const fs::path index_path = root / kHfIndexFile;
  if (!fs::exists(index_path, ec)) {
    add_file(out, root / kHfWeightsFile, nullptr);
    return out;
  }
  const std::string where = index_path.string();
  const json index = parse_json(read_text(index_path), where);
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    fail(where, "has no \"weight_map\" object");
  std::map<std::string, std::set<std::string>> files;  // shard -> the tensors it holds
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) fail(where, "maps '" + name + "' to a non-string");
    const std::string f = file.get<std::string>();
    check_shard_name(f, where);
    files[f].insert(name);
  }
  if (files.empty()) fail(where, "maps no tensors");
  for (const auto& [file, names] : files) add_file(out, root / file, &names);
  return out;
}

}  // namespace mixprec::io
