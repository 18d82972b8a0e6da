// Which transformer blocks recompute their activations in backward, from torchtitan's
// [activation_checkpoint] section (config::ActivationCheckpointConfig), and how:
//   mode = "full"                               every block: only its input is kept;
//   mode = "selective", selective_ac_option = "op"  every block keeps the outputs of attention
//                                               and of every other linear, recomputes the rest;
//   mode = "selective", selective_ac_option = "k"   blocks k, 2k, ... (counting from 1, as
//                                               torchtitan) fully, the others not at all.
// Gradients and losses are bit for bit those of mode "none" (autograd/checkpoint.h).
#pragma once

#include <cstdint>
#include <string>

#include "mixprec/config/train_config.h"

namespace mixprec::models {

enum class BlockCheckpoint { none, full, selective_ops };

class ActivationCheckpoint {
 public:
  ActivationCheckpoint() = default;  // none
  // Throws mixprec::Error naming activation_checkpoint.mode or .selective_ac_option and the
  // value.
  static ActivationCheckpoint from_config(const config::ActivationCheckpointConfig& config);

  // How block `layer` (0-based) runs.
  BlockCheckpoint block(int64_t layer) const;
  // The same as a period: block l is checkpointed when every() > 0 and (l + 1) % every() == 0
  // (1 for full and selective "op", k for selective "k", 0 for none), as checkpointed().
  int64_t every() const { return every_ > 0 ? every_ : kind_ == BlockCheckpoint::none ? 0 : 1; }
  BlockCheckpoint checkpointed() const { return kind_; }
  // "none", "full", "selective op", "selective every 2nd block".
  std::string describe() const;
  bool operator==(const ActivationCheckpoint&) const = default;

 private:
  BlockCheckpoint kind_ = BlockCheckpoint::none;
  int64_t every_ = 0;  // > 0: every every_-th block full, the others none
};

}  // namespace mixprec::models
