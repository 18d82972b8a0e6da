// A directory of training checkpoints, one safetensors file per saved step:
//
//   <dir>/step-00000120.safetensors      (the step, zero-padded to at least 8 digits)
//
//   CheckpointStore store("runs/a/ckpt", /*keep_last=*/3);
//   store.save(step, flatten_training_state(state), {{"config", toml_text}});
//   if (auto ckpt = store.load_latest()) restore_training_state(ckpt->tensors, state);
//
// A save is atomic (save_safetensors: temporary file beside the target, fsync, rename, fsync
// of the directory), so a crash or an error mid-save leaves every earlier checkpoint intact
// and no temporary file. Only after a successful save are the oldest checkpoints beyond
// keep_last deleted, never the one just written. latest() and load_latest() skip files that
// fail validation (a torn copy, garbage) with a warning naming them, and ignore temporary and
// unrelated files.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/io/safetensors.h"
#include "mixprec/tensor/tensor_map.h"

namespace mixprec::io {

using mixprec::TensorMap;

struct Checkpoint {
  std::string path;
  int64_t step = -1;  // from the file name; -1 when it is not step-<N>.safetensors
  TensorMap tensors;
  Metadata metadata;
};

// Reads and validates a checkpoint file. Errors are mixprec::Error naming the file and, where
// there is one, the entry at fault (truncated data, bad header JSON, offsets out of range or
// overlapping, unknown dtype, shape/byte-count mismatch).
Checkpoint load_checkpoint(const std::string& path);

// Receives one line per warning (skipped corrupt checkpoints, failed deletions).
using WarningSink = std::function<void(const std::string&)>;

class CheckpointStore {
 public:
  // keep_last: how many checkpoints to keep after a save (0 keeps them all, as torchtitan's
  // keep_latest_k). `warn` defaults to a "mixprec: warning: ..." line on stderr.
  CheckpointStore(std::string dir, int keep_last, WarningSink warn = {});

  const std::string& dir() const { return dir_; }
  int keep_last() const { return keep_last_; }
  // <dir>/step-<8+ digits>.safetensors
  std::string path_for(int64_t step) const;
  // The step a file name encodes, or nullopt when the name is not one this store writes
  // (temporary files, other files, non-canonical padding).
  static std::optional<int64_t> step_of(const std::string& file_name);

  // Writes the checkpoint of `step` (replacing one of the same step), creating the directory
  // if needed, then rotates. Returns the path written. Throws mixprec::Error, leaving the
  // directory as it was, when the save fails.
  std::string save(int64_t step, const TensorMap& tensors, const Metadata& metadata = {});

  // Steps of the files named like checkpoints, ascending (contents not validated).
  std::vector<int64_t> steps() const;
  // The newest checkpoint that loads and validates; nullopt when there is none. Each file
  // skipped on the way is reported through the warning sink, all of them in one line.
  std::optional<Checkpoint> load_latest() const;
  // Path of that checkpoint (validating means reading it whole: prefer load_latest()).
  std::optional<std::string> latest() const;

 private:
  void rotate(int64_t just_written) const;

  std::string dir_;
  int keep_last_;
  WarningSink warn_;
};

}  // namespace mixprec::io
