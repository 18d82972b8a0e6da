// [activation_checkpoint] read into a per-block choice (activation_checkpoint.h).
#include "mixprec/models/activation_checkpoint.h"

#include <charconv>

#include "mixprec/core/error.h"

namespace mixprec::models {

ActivationCheckpoint ActivationCheckpoint::from_config(
    const config::ActivationCheckpointConfig& c) {
  ActivationCheckpoint ac;
  if (c.mode == "none") return ac;
  if (c.mode == "full") {
    ac.kind_ = BlockCheckpoint::full;
    return ac;
  }
  MIXPREC_CHECK(c.mode == "selective", "activation_checkpoint.mode",
                "\"" + c.mode + "\" is not one of: none, selective, full");
  const std::string& o = c.selective_ac_option;
  if (o == "op") {
    ac.kind_ = BlockCheckpoint::selective_ops;
    return ac;
  }
  int64_t k = 0;
  const auto [end, ec] = std::from_chars(o.data(), o.data() + o.size(), k);
  MIXPREC_CHECK(!o.empty() && ec == std::errc() && end == o.data() + o.size() && k > 0,
                "activation_checkpoint.selective_ac_option",
                "\"" + o + "\" is neither \"op\" nor a positive integer (every k-th block)");
  ac.kind_ = BlockCheckpoint::full;
  ac.every_ = k;
  return ac;
}

BlockCheckpoint ActivationCheckpoint::block(int64_t layer) const {
  if (every_ > 0) return (layer + 1) % every_ == 0 ? BlockCheckpoint::full : BlockCheckpoint::none;
  return kind_;
}

std::string ActivationCheckpoint::describe() const {
  if (every_ > 0) return "selective, every " + std::to_string(every_) + " blocks fully";
  switch (kind_) {
    case BlockCheckpoint::none:
      return "none";
    case BlockCheckpoint::full:
      return "full";
    case BlockCheckpoint::selective_ops:
      return "selective op (attention and every other linear kept)";
  }
  return "?";
}

}  // namespace mixprec::models
