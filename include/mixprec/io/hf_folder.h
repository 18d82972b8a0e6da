// Hugging Face checkpoint folders: config.json beside the weights, which are one
// model.safetensors or, past a size, shards model-0000k-of-0000n.safetensors listed by
// model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {tensor:
// file}}), as transformers' save_pretrained writes them. The family-specific part (tensor names,
// config keys) is hf_weights.h's; this file only moves named tensors and the config's text.
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/io/safetensors.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::io {

inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";

struct HfCheckpoint {
  std::string dir;
  std::string config_json;  // config.json as written
  TensorMap tensors;        // every tensor of every shard, by its Hugging Face name
};

// Writes config.json and the tensors (in order) into `dir`, which must not exist yet or be
// empty (an export never replaces weights someone has). One file when the tensors' bytes are
// at most max_shard_bytes, else shards that each stay under it (a larger tensor gets a shard of
// its own) and the index. All or nothing: the files are written into a staging folder beside
// `dir` (".NAME.partial-XXXXXX") that is renamed to `dir` once complete; on any failure (a full
// disk) the staging folder and any parent folder this call created are removed, and the
// Error names `dir`, the file and the OS's reason.
void write_hf_folder(const std::string& dir, const std::string& config_json,
                     const TensorList& tensors, uint64_t max_shard_bytes);

// Reads a folder written as above (by us, or by transformers). With an index, exactly the
// files it names are read, each must hold exactly the tensors it lists, and file names must be
// plain names inside the folder. Errors name the file and the entry at fault.
HfCheckpoint read_hf_folder(const std::string& dir);

}  // namespace mixprec::io
