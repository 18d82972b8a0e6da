// Hugging Face checkpoint folders (hf_folder.h): the shard plan, the index, and reading both
// back with every file name and tensor accounted for.
#include "mixprec/io/hf_folder.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
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
  const auto type = fs::status(path, ec).type();
  if (type == fs::file_type::not_found) fail(path.string(), "does not exist");
  if (type != fs::file_type::regular) fail(path.string(), "is not a regular file");
  const uint64_t size = fs::file_size(path, ec);
  if (ec || size > kMaxJsonBytes)
    fail(path.string(), "is larger than " + std::to_string(kMaxJsonBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) fail(path.string(), "cannot be read");
  return text.str();
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

}  // namespace

void write_hf_folder(const std::string& dir, const std::string& config_json,
                     const TensorList& tensors, uint64_t max_shard_bytes) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    fail(dir, "already exists and is not an empty folder; choose a new one (nothing was written)");
  fs::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create the folder: " + ec.message());
  const fs::path root(dir);
  const std::vector<TensorList> shards =
      plan_shards(tensors, std::max<uint64_t>(max_shard_bytes, 1));
  const Metadata metadata{{"format", "pt"}};
  if (shards.size() == 1) {
    save_safetensors((root / kHfWeightsFile).string(), shards[0], metadata);
  } else {
    json weight_map = json::object();
    uint64_t total = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const std::string file =
          fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
      save_safetensors((root / file).string(), shards[i], metadata);
      for (const auto& [name, t] : shards[i]) {
        weight_map[name] = file;
        total += tensor_bytes(t);
      }
    }
    const json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_text(root / kHfIndexFile, index.dump(2) + "\n");
  }
  write_text(root / kHfConfigFile, config_json);  // last: a folder with config.json is whole
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
